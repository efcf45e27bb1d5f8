--@ writes: kv
START TRANSACTION READ WRITE; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT
