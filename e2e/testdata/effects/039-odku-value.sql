--@ writes: kv
INSERT INTO {{kv}} VALUES (1, {{n}}) ON DUPLICATE KEY UPDATE v = VALUE(v)
