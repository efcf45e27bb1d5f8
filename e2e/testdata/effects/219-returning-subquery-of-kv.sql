--@ writes: log
--@ piece
INSERT INTO {{log}} (msg) VALUES ('q{{n}}') RETURNING (SELECT MAX(v) FROM {{kv}})
