--@ writes: kv db2.kv
USE {{db2}}; UPDATE kv SET v = {{n}} WHERE id = 1; UPDATE {{db}}.kv SET v = {{n}} WHERE id = 1
