--@ writes: log
INSERT INTO {{log}} (msg) VALUES ('s{{n}}') RETURNING *
