--@ writes: other
BEGIN NOT ATOMIC IF (SELECT COUNT(*) FROM {{kv}}) > 0 THEN UPDATE {{other}} SET v = {{n}} WHERE id = 1; END IF; END
