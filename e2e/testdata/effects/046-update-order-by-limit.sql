--@ writes: kv
--@ piece
UPDATE {{kv}} SET v = {{n}} ORDER BY id LIMIT 1
