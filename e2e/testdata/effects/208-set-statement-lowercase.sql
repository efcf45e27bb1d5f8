--@ writes: kv
set statement max_statement_time=0 for update {{kv}} SET v = {{n}} WHERE id = 1
