--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
/*!40101 ALTER TABLE {{kv}} COMMENT = 'x{{n}}' */
