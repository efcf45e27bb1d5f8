--@ writes: kv
USE {{db}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
