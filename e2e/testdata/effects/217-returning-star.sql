--@ writes: log
--@ piece
INSERT INTO {{log}} (msg) VALUES ('s{{n}}') RETURNING *
