--@ writes: kv
BEGIN NOT ATOMIC DECLARE other BIGINT DEFAULT {{n}}; UPDATE {{kv}} SET v = other WHERE id = 1; END
