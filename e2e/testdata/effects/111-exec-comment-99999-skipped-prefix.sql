--@ writes: kv
/*!99999 SELECT 1, */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
