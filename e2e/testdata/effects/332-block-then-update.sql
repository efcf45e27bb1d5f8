--@ writes: kv
BEGIN NOT ATOMIC SELECT 1; END; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
