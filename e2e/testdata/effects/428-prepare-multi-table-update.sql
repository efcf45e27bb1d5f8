--@ writes: kv
PREPARE s FROM 'UPDATE {{kv}} k JOIN {{other}} o ON o.id = k.id SET k.v = ? WHERE k.id = 1'; EXECUTE s USING {{n}}
