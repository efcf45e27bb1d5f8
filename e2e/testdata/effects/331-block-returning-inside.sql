--@ writes: log
BEGIN NOT ATOMIC INSERT INTO {{log}} (msg) VALUES ('b{{n}}') RETURNING id; END
