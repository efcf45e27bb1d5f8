--@ writes: kv
SELECT ';'; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
