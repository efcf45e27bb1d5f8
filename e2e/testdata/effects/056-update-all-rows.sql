--@ writes: kv
UPDATE {{kv}} SET v = {{n}}
