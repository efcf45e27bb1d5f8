--@ writes: kv
PREPARE MyStmt FROM 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'
--@ next
EXECUTE mystmt
