--@ writes: kv
--@ piece
INSERT INTO {{kv}} VALUES (1, {{n}}) ON DUPLICATE KEY UPDATE v = VALUES(v)
