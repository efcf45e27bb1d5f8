--@ writes: kv
INSERT INTO {{kv}} VALUES (1, {{n}}), (2, {{n}}) ON DUPLICATE KEY UPDATE v = v + 1
