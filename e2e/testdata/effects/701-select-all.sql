--@ writes:
--@ piece
SELECT * FROM {{kv}}
