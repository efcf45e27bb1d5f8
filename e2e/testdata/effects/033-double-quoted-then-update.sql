--@ writes: kv
SELECT "a;b"; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
