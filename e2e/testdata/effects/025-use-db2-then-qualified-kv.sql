--@ writes: kv
USE {{db2}}; UPDATE {{db}}.{{kv}} SET v = {{n}} WHERE id = 1
