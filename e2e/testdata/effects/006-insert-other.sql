--@ writes: other
--@ piece
INSERT INTO {{other}} VALUES ({{n}}, 1)
