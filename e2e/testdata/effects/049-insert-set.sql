--@ writes: kv
--@ piece
INSERT INTO {{kv}} SET id = {{n}}, v = 1
