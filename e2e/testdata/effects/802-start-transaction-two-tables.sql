--@ writes: kv other
START TRANSACTION; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; UPDATE {{other}} SET v = {{n}} WHERE id = 1; COMMIT
