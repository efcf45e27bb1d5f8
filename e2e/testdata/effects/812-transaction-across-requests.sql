--@ writes: kv
BEGIN
--@ next
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
--@ next
COMMIT
