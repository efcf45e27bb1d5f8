--@ writes: db2.kv
UPDATE {{db2}}.kv SET v = {{n}} WHERE id = 1
