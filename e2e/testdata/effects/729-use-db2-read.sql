--@ writes:
USE {{db2}}; SELECT * FROM kv
