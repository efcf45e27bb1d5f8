--@ writes:
EXECUTE IMMEDIATE 'SELECT * FROM {{kv}}'
