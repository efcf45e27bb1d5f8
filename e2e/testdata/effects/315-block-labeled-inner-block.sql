--@ writes: kv
BEGIN NOT ATOMIC lbl: BEGIN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; LEAVE lbl; UPDATE {{other}} SET v = -1 WHERE id = 1; END lbl; END
