--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
CREATE INDEX iv2 ON {{kv}} (v)
--@ next
DROP INDEX iv2 ON {{kv}}
