--@ writes: kv
PREPARE s FROM 'UPDATE {{kv}} SET v = ? WHERE id = 1'
--@ next
EXECUTE s USING {{n}}
--@ next
DEALLOCATE PREPARE s
