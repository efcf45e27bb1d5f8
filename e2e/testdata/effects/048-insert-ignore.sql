--@ writes: kv
INSERT IGNORE INTO {{kv}} VALUES (1, 0), ({{n}}, 1)
