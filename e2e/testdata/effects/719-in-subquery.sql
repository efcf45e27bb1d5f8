--@ writes:
SELECT * FROM {{kv}} WHERE v IN (SELECT v FROM {{other}})
