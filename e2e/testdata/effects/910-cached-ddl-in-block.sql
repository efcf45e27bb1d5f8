--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
BEGIN NOT ATOMIC ALTER TABLE {{kv}} COMMENT = 'b{{n}}'; END
