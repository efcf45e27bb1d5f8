--@ writes: log
--@ piece
INSERT INTO {{log}} (msg) VALUES ('r{{n}}') RETURNING id
