--@ writes: other
PREPARE s FROM 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'
--@ next
PREPARE s FROM 'UPDATE {{other}} SET v = ? WHERE id = 1'
--@ next
EXECUTE s USING {{n}}
