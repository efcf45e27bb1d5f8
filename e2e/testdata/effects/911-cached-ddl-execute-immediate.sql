--@ writes: kv
--@ note: DDL of the cached table: runs, and the copy is loaded again after it
EXECUTE IMMEDIATE 'ALTER TABLE {{kv}} COMMENT = ''e{{n}}'''
