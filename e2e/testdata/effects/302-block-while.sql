--@ writes: kv
BEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; WHILE n < 2 DO SET n = n + 1; END WHILE; UPDATE {{kv}} SET v = {{n}} + n WHERE id = 1; END
