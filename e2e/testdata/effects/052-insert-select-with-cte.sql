--@ writes: kv
INSERT INTO {{kv}} WITH c AS (SELECT {{n}} AS id) SELECT id, 0 FROM c
