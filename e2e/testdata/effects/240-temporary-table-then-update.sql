--@ writes: kv
CREATE TEMPORARY TABLE {{new}} (id INT); INSERT INTO {{new}} VALUES (1); UPDATE {{kv}} SET v = {{n}} WHERE id = 1; DROP TEMPORARY TABLE {{new}}
