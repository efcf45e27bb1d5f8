--@ writes: kv
BEGIN NOT ATOMIC CASE {{n}} % 2 WHEN 0 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ELSE UPDATE {{kv}} SET v = {{n}} WHERE id = 2; END CASE; END
