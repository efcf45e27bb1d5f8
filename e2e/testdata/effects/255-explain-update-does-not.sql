--@ writes:
--@ piece
EXPLAIN UPDATE {{kv}} SET v = {{n}} WHERE id = 1
