--@ writes: kv
UPDATE LOW_PRIORITY IGNORE {{kv}} SET v = {{n}} WHERE id = 1
