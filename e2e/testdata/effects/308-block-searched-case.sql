--@ writes: kv
BEGIN NOT ATOMIC CASE WHEN {{n}} > 0 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ELSE UPDATE {{other}} SET v = {{n}} WHERE id = 1; END CASE; END
