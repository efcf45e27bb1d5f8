--@ writes: kv
GRANT SELECT ON {{db}}.{{other}} TO {{user}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
