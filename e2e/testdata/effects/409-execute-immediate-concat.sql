--@ writes: kv
--@ note: a text built at run time: the account cannot tell
EXECUTE IMMEDIATE CONCAT('UPDATE {{kv}} ', 'SET v = {{n}} WHERE id = 1')
