--@ writes: kv
/*!101120 SELECT 1, */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
