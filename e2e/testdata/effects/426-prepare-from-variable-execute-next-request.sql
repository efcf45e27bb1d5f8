--@ writes: kv
SET @q = 'UPDATE {{kv}} SET v = ? WHERE id = 1'; PREPARE s FROM @q
--@ next
EXECUTE s USING {{n}}
