--@ writes: kv
SHOW CREATE TABLE {{kv}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
