--@ writes: kv
SELECT 1; /* x; y */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
