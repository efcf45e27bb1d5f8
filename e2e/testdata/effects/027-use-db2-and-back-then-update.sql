--@ writes: kv
USE {{db2}}; USE {{db}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
