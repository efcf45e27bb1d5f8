--@ writes: kv
/*!100000 UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
