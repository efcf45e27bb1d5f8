--@ writes: other
SELECT * FROM {{kv}}; UPDATE {{other}} SET v = {{n}} WHERE id = 1
