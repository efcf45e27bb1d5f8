--@ writes: other
--@ piece
INSERT INTO {{other}} VALUES (2, {{n}}) ON DUPLICATE KEY UPDATE v = v + 1
