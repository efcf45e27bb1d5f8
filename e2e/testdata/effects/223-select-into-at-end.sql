--@ writes:
SELECT v FROM {{kv}} WHERE id = 1 INTO @y
