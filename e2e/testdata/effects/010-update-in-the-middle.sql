--@ writes: kv
SELECT 1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; SELECT 2
