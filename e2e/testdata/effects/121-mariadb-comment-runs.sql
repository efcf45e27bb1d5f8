--@ writes: kv
/*M!100100 UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
