--@ writes: kv
/*!40101 EXECUTE IMMEDIATE 'UPDATE {{kv}} SET v = {{n}} WHERE id = 1' */
