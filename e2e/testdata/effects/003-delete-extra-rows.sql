--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 0); DELETE FROM {{kv}} WHERE id > 3
