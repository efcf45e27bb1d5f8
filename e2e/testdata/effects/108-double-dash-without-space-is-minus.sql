--@ writes: kv
SELECT 1--1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
