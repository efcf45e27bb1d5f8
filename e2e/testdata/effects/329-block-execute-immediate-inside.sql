--@ writes: kv
BEGIN NOT ATOMIC EXECUTE IMMEDIATE 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'; END
