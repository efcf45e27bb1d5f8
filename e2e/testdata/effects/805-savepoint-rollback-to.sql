--@ writes: kv
BEGIN; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; SAVEPOINT a; UPDATE {{kv}} SET v = 0 WHERE id = 1; ROLLBACK TO SAVEPOINT a; COMMIT
