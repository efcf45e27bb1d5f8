--@ writes: kv
SELECT 1; -- x;
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
