--@ writes: kv
LOCK TABLES {{kv}} WRITE; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; UNLOCK TABLES
