--@ writes: kv
SHOW TABLES; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
