--@ writes: kv
BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; l: LOOP SET i = i + 1; IF i > 2 THEN LEAVE l; END IF; UPDATE {{kv}} SET v = {{n}} + i WHERE id = 1; END LOOP l; END
