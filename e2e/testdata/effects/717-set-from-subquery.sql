--@ writes:
--@ piece
SET @a = (SELECT v FROM {{kv}} WHERE id = 1)
