--@ writes: kv
INSERT INTO {{kv}} SELECT id + {{n}}, v FROM {{other}} WHERE id = 1
