--@ writes: kv
CASE WHEN 1 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ELSE DO 0; END CASE
