--@ writes: kv other
EXECUTE IMMEDIATE 'UPDATE {{other}} SET v = f_kv(?) WHERE id = 1' USING {{n}}
