--@ writes: other
SELECT 1; SET STATEMENT max_statement_time = 0 FOR UPDATE {{other}} SET v = {{n}} WHERE id = 1
