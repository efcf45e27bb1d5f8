--@ writes:
--@ errors: 1295
--@ conservative
--@ note: MariaDB refuses EXECUTE IMMEDIATE in a prepared statement
EXECUTE IMMEDIATE 'EXECUTE IMMEDIATE ''UPDATE {{kv}} SET v = {{n}} WHERE id = 1'''
