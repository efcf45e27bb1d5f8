--@ writes: kv
execute immediate 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'
