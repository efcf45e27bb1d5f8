--@ writes: kv
INSERT INTO {{kv}} (v, id) VALUES (1, {{n}})
