--@ writes:
SELECT 1 # ; UPDATE {{kv}} SET v = 999 WHERE id = 1
