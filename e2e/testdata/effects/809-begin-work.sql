--@ writes: kv
BEGIN WORK; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT WORK
