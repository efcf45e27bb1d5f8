--@ writes: kv
PREPARE s FROM 'UPDATE {{kv}} SET v = ? WHERE id = 1'; SET @v = {{n}}; EXECUTE s USING @v; DEALLOCATE PREPARE s
