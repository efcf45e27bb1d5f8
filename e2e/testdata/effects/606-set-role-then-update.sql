--@ writes: kv
SET ROLE {{role}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
