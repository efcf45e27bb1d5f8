--@ writes:
--@ conservative
--@ note: rolled back: the log shows nothing
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; ROLLBACK
