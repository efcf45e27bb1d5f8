--@ writes: kv
SET STATEMENT max_statement_time = 0, sql_mode = 'STRICT_ALL_TABLES' FOR UPDATE {{kv}} SET v = {{n}} WHERE id = 1
