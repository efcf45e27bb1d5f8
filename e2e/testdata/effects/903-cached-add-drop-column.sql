--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
ALTER TABLE {{kv}} ADD COLUMN extra INT NULL
--@ next
ALTER TABLE {{kv}} DROP COLUMN extra
