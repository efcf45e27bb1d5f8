--@ writes:
SELECT v FROM {{kv}} WHERE id = 1 FOR UPDATE
