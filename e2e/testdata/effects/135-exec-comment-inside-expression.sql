--@ writes: kv
UPDATE {{kv}} SET v = {{n}} /*!40101 + 1 */ WHERE id = 1
