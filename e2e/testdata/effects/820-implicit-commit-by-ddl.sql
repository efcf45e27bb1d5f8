--@ writes: kv new
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; CREATE TABLE {{new}} (id INT); DROP TABLE {{new}}; ROLLBACK
