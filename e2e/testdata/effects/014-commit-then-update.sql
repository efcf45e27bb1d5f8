--@ writes: kv
COMMIT; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
