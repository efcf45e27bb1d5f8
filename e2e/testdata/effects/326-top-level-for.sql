--@ writes: kv
FOR i IN 1..2 DO UPDATE {{kv}} SET v = {{n}} + i WHERE id = i; END FOR
