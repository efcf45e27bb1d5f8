--@ writes: kv
BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; REPEAT SET i = i + 1; UPDATE {{kv}} SET v = {{n}} + i WHERE id = 1; UNTIL i >= 2 END REPEAT; END
