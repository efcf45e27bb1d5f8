--@ writes: kv
/*!99999 UPDATE {{other}} SET v = {{n}} WHERE id = 1; */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
