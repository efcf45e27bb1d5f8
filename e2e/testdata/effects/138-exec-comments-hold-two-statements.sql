--@ writes: kv other
/*!40101 UPDATE {{other}} SET v = {{n}} WHERE id = 1 */; /*M!100000 UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
