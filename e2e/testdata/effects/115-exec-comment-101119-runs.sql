--@ writes: kv
/*!101119 UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
