--@ writes: kv
BEGIN NOT ATOMIC SET ROLE {{role}}; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END
