--@ writes:
--@ conservative
START TRANSACTION
--@ next
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
--@ next
ROLLBACK
