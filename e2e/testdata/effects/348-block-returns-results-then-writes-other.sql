--@ writes: other
BEGIN NOT ATOMIC SELECT * FROM {{kv}}; SELECT 2; UPDATE {{other}} SET v = {{n}} WHERE id = 1; END
