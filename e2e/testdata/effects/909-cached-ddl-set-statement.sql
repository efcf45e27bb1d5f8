--@ writes: kv
--@ errors: 8242
--@ note: DDL of the cached table: refused (8242) until it runs through the proxy
SET STATEMENT max_statement_time = 0 FOR ALTER TABLE {{kv}} COMMENT = 's{{n}}'
