--@ writes: other
BEGIN NOT ATOMIC DECLARE x BIGINT DEFAULT (SELECT v FROM {{kv}} WHERE id = 1); UPDATE {{other}} SET v = x + {{n}} WHERE id = 1; END
