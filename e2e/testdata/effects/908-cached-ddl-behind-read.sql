--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
SELECT 1; ALTER TABLE {{kv}} COMMENT = 'r{{n}}'
