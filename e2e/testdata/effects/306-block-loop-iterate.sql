--@ writes: kv
BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; l: WHILE i < 3 DO SET i = i + 1; IF i = 2 THEN ITERATE l; END IF; UPDATE {{kv}} SET v = {{n}} + i WHERE id = i; END WHILE l; END
