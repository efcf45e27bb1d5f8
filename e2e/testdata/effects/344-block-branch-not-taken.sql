--@ writes:
--@ conservative
--@ note: the write of kv never runs; the account counts every branch
BEGIN NOT ATOMIC IF 0 THEN UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END IF; END
