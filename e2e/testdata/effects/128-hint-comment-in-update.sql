--@ writes: kv
UPDATE /*+ NO_RANGE_OPTIMIZATION(kv) */ {{kv}} SET v = {{n}} WHERE id = 1
