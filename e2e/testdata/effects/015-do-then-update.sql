--@ writes: kv
DO 1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
