--@ writes: kv
PREPARE s FROM 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'; EXECUTE s; DROP PREPARE s
