--@ writes:
--@ piece
SELECT v INTO @x FROM {{kv}} WHERE id = 1
