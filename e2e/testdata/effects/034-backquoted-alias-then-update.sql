--@ writes: kv
SELECT 1 AS `a;b`; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
