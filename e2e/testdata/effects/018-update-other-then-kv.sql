--@ writes: kv other
UPDATE {{other}} SET v = {{n}} WHERE id = 1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
