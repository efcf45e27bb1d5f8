--@ writes:
--@ piece
EXPLAIN SELECT * FROM {{kv}} WHERE id = 1
