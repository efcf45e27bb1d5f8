--@ writes: kv
BEGIN NOT ATOMIC IF 0 THEN UPDATE {{other}} SET v = {{n}} WHERE id = 1; ELSEIF 1 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ELSE DELETE FROM {{log}}; END IF; END
