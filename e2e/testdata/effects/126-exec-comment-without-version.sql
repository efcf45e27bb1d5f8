--@ writes: kv
/*! UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
