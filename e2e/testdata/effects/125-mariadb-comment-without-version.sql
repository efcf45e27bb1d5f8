--@ writes: kv
/*M! UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
