--@ writes: kv
--@ note: MariaDB's ANALYZE runs the statement
ANALYZE UPDATE {{kv}} SET v = {{n}} WHERE id = 1
