--@ writes: kv
SET @k = 0; BEGIN NOT ATOMIC WHILE @k < 1 DO SET @k = @k + 1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END WHILE; END
