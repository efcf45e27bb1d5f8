--@ writes: log
EXECUTE IMMEDIATE 'INSERT INTO {{log}} (msg) VALUES (''e{{n}}'') RETURNING id'
