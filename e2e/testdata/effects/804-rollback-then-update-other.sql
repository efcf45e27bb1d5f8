--@ writes: other
--@ conservative
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ROLLBACK; UPDATE {{other}} SET v = {{n}} WHERE id = 1
