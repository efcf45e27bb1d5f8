--@ writes: db2.t2
--@ conservative
INSERT INTO {{db2}}.t2 SELECT id + {{n}}, v FROM {{kv}} WHERE id = 1
