--@ writes:
SELECT JSON_OBJECT('id', id, 'v', v) FROM {{kv}}
