--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
ALTER TABLE {{kv}} MODIFY v BIGINT NOT NULL DEFAULT 0
