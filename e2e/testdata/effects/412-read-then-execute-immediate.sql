--@ writes: kv
SELECT 1; EXECUTE IMMEDIATE 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'
