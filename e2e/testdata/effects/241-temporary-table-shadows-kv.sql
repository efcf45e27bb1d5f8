--@ writes:
--@ conservative
--@ note: the session's own kv; the base table's rows do not change
CREATE TEMPORARY TABLE {{kv}} (id INT PRIMARY KEY, v BIGINT); INSERT INTO {{kv}} VALUES (1, 99); DROP TEMPORARY TABLE {{kv}}
