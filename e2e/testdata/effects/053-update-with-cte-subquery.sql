--@ writes: kv
UPDATE {{kv}} SET v = (WITH c AS (SELECT {{n}} AS x) SELECT x FROM c) WHERE id = 1
