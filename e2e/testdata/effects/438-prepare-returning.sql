--@ writes: log
PREPARE s FROM 'INSERT INTO {{log}} (msg) VALUES (?) RETURNING id'; EXECUTE s USING 'p{{n}}'
