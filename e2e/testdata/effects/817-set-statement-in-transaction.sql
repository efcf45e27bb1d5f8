--@ writes: kv
START TRANSACTION; SET STATEMENT max_statement_time = 0 FOR UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT
