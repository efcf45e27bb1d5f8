--@ writes: kv new
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
RENAME TABLE {{kv}} TO {{new}}, {{new}} TO {{kv}}
