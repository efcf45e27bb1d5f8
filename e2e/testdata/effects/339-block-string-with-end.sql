--@ writes: kv
BEGIN NOT ATOMIC SELECT 'END; END IF'; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END
