--@ writes: kv other
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; COMMIT AND CHAIN; UPDATE {{other}} SET v = {{n}} WHERE id = 1; COMMIT
