--@ writes: log
--@ conservative
--@ note: a stored function may write anything
INSERT INTO {{log}} (msg) VALUES ('f{{n}}') RETURNING f_pure(id)
