--@ writes: kv
SET STATEMENT sql_mode = '' FOR UPDATE {{kv}} SET v = {{n}} WHERE id = 1
