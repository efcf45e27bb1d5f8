--@ writes: kv
SHOW GRANTS; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
