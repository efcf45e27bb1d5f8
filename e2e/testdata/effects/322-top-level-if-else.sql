--@ writes: kv
IF 0 THEN UPDATE {{other}} SET v = {{n}} WHERE id = 1; ELSE UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END IF
