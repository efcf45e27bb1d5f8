--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 1), ({{n2}}, 2)
