--@ writes: log
BEGIN; INSERT INTO {{log}} (msg) VALUES ('t{{n}}') RETURNING id; COMMIT
