--@ writes: kv
SET @x = f_kv({{n}})
