--@ writes: kv other
--@ piece
UPDATE {{kv}} k, {{other}} o SET k.v = {{n}}, o.v = {{n}} WHERE k.id = 1 AND o.id = 1
