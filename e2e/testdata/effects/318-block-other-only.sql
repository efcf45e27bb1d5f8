--@ writes: other
BEGIN NOT ATOMIC UPDATE {{other}} SET v = {{n}} WHERE id = 1; END
