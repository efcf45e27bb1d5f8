--@ writes: db2.t2
--@ piece
UPDATE {{db2}}.t2 SET v = {{n}} WHERE id = 1
