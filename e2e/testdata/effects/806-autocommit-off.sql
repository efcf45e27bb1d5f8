--@ writes: kv
SET autocommit = 0; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT; SET autocommit = 1
