--@ writes: kv other
UPDATE {{other}} SET v = f_kv({{n}}) WHERE id = 1
