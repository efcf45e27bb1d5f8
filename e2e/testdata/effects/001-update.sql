--@ writes: kv
--@ piece
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
