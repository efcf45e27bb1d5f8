--@ writes: kv
PREPARE s FROM 'SELECT f_kv(?)'; EXECUTE s USING {{n}}
