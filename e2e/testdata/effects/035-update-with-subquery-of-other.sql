--@ writes: kv
--@ piece
UPDATE {{kv}} SET v = (SELECT {{n}} + 0 * COUNT(*) FROM {{other}}) WHERE id = 1
