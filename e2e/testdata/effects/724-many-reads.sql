--@ writes:
SELECT 1; SHOW TABLES; SELECT * FROM {{kv}}; SELECT * FROM {{other}}
