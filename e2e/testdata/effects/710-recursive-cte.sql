--@ writes:
WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5) SELECT * FROM c JOIN {{kv}} ON {{kv}}.id = c.n
