--@ writes: kv
PREPARE `s x` FROM 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'; EXECUTE `s x`
