--@ writes: other
EXECUTE IMMEDIATE 'UPDATE {{other}} SET v = {{n}} WHERE id = 1'
