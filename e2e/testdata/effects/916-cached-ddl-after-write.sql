--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ALTER TABLE {{kv}} COMMENT = 'w{{n}}'
