--@ writes: kv
EXECUTE IMMEDIATE 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1 AND ''a'' = ''a'''
