--@ writes: other
PREPARE s FROM 'UPDATE {{other}} SET v = ? WHERE id = 1'
--@ next
BEGIN NOT ATOMIC EXECUTE s USING {{n}}; END
