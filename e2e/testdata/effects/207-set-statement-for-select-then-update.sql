--@ writes: kv
SET STATEMENT max_statement_time = 0 FOR SELECT * FROM {{kv}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
