--@ writes: kv
SELECT 1; SET @x = 2; DO 3; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
