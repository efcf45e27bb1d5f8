--@ writes: kv
SET @i = 0; WHILE @i < 2 DO SET @i = @i + 1; UPDATE {{kv}} SET v = {{n}} + @i WHERE id = 1; END WHILE
