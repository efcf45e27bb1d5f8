--@ writes: log kv
SELECT 1; INSERT INTO {{log}} (msg) VALUES ('m{{n}}') RETURNING id; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
