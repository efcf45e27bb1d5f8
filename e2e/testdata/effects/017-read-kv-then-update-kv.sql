--@ writes: kv
SELECT * FROM {{kv}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
