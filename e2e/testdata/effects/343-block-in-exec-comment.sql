--@ writes: kv
/*!40101 BEGIN NOT ATOMIC UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END */
