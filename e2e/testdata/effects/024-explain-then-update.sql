--@ writes: kv
EXPLAIN SELECT * FROM {{kv}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
