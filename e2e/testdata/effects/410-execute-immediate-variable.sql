--@ writes: kv
SET @q = 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'; EXECUTE IMMEDIATE @q
