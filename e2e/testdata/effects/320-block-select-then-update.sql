--@ writes: kv
BEGIN NOT ATOMIC SELECT * FROM {{kv}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END
