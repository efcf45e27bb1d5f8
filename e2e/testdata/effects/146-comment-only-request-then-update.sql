--@ writes: kv
/* first */ SELECT 1; # second
UPDATE {{kv}} SET v = {{n}} WHERE id = 1 -- third
