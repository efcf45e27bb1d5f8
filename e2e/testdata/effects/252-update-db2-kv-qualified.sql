--@ writes: db2.kv
--@ piece
UPDATE {{db2}}.kv SET v = {{n}} WHERE id = 1
