--@ writes: kv
REPEAT UPDATE {{kv}} SET v = {{n}} WHERE id = 1; UNTIL 1 END REPEAT
