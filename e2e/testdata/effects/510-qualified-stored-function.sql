--@ writes: kv
SELECT {{db}}.f_kv({{n}})
