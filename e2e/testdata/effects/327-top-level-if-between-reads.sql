--@ writes: kv
SELECT 1; IF 1 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END IF; SELECT 2
