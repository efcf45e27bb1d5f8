--@ writes:
DESCRIBE {{kv}}
