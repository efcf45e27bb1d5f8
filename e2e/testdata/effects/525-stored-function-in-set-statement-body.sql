--@ writes: kv
SET STATEMENT max_statement_time = 0 FOR SELECT f_kv({{n}})
