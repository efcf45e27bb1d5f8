--@ writes:
--@ errors: 1243
--@ conservative
PREPARE s FROM 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1'
--@ next
DEALLOCATE PREPARE s
--@ next
EXECUTE s
