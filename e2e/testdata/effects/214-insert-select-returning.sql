--@ writes: log
--@ conservative
INSERT INTO {{log}} (msg) SELECT CONCAT('k', v) FROM {{kv}} WHERE id = 1 RETURNING id
