--@ writes: kv
SELECT 1; SELECT f_kv({{n}})
