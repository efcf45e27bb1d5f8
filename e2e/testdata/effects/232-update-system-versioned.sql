--@ writes: vers
--@ piece
UPDATE {{vers}} SET v = {{n}} WHERE id = 1
