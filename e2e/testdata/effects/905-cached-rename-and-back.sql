--@ writes: kv new
--@ errors: 8242
--@ note: DDL of the cached table: refused (8242) until it runs through the proxy
RENAME TABLE {{kv}} TO {{new}}, {{new}} TO {{kv}}
