--@ writes: kv
BEGIN NOT ATOMIC BEGIN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END; END
