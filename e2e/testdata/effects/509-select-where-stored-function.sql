--@ writes: kv
SELECT * FROM {{other}} WHERE id = f_kv({{n}})
