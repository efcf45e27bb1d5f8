--@ writes: kv
/*!50700 SELECT 1, */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
