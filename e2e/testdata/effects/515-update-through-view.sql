--@ writes: kv
--@ indirect: kv
--@ piece
UPDATE {{kvview}} SET v = {{n}} WHERE id = 1
