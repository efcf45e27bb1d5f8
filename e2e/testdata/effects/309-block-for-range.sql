--@ writes: kv
BEGIN NOT ATOMIC FOR i IN 1..3 DO UPDATE {{kv}} SET v = {{n}} + i WHERE id = i; END FOR; END
