--@ writes: other
--@ conservative
--@ note: a writing statement's every table counts as written
INSERT INTO {{other}} SELECT id + {{n}}, v FROM {{kv}} WHERE id = 1
