--@ writes: kv
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT
