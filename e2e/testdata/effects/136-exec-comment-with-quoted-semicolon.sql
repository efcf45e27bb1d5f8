--@ writes: kv
/*!40101 SELECT 'a;b' */; UPDATE {{kv}} SET v = {{n}} WHERE id = 1
