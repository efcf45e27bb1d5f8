--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
SET STATEMENT max_statement_time = 0 FOR ALTER TABLE {{kv}} COMMENT = 's{{n}}'
