--@ writes: kv
EXECUTE IMMEDIATE 'UPDATE {{kv}} SET v = ? + ? WHERE id = 1' USING {{n}}, 1
