--@ writes:
SELECT 'UPDATE {{kv}} SET v = 1'
