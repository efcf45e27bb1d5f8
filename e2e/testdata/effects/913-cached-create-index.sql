--@ writes: kv
--@ errors: 8242
--@ note: DDL of the cached table: refused (8242) until it runs through the proxy
CREATE INDEX iv2 ON {{kv}} (v)
--@ next
DROP INDEX iv2 ON {{kv}}
