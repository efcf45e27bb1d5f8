--@ writes: kv
SELECT 'it\'s; fine'; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
