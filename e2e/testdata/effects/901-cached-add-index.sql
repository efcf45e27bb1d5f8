--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
ALTER TABLE {{kv}} ADD INDEX iv (v)
--@ next
DROP INDEX iv ON {{kv}}
