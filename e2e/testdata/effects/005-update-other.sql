--@ writes: other
--@ piece
UPDATE {{other}} SET v = {{n}} WHERE id = 1
