--@ writes: kv
/*!110000 SELECT 1, */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
