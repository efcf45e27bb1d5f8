--@ writes: kv
BEGIN
--@ next
BEGIN NOT ATOMIC UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END
--@ next
COMMIT
