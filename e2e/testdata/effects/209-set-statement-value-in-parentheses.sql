--@ writes: kv
SET STATEMENT max_statement_time = (1 + 1) FOR UPDATE {{kv}} SET v = {{n}} WHERE id = 1
