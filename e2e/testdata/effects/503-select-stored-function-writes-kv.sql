--@ writes: kv
SELECT f_kv({{n}})
