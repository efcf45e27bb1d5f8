--@ writes: kv
SELECT /*+ MAX_EXECUTION_TIME(1000) */ 1; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
