--@ writes:
SHOW CREATE TABLE {{kv}}
