--@ writes: kv
SELECT v INTO @x FROM {{kv}} WHERE id = 1; UPDATE {{kv}} SET v = @x + {{n}} WHERE id = 2
