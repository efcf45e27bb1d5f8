--@ writes: kv
--@ indirect: kv
UPDATE {{kvview}} SET v = {{n}} WHERE id = 1
