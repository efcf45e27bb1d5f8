--@ writes:
SELECT * FROM (SELECT id, v FROM {{kv}}) AS d WHERE d.id > 1
