--@ writes:
--@ errors: 1064
--@ conservative
--@ note: MariaDB ends the statement at the semicolon, inside the comment: nothing runs
/*!40101 SELECT 1; */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
