--@ writes: kv
SELECT 1; /*!40101 UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
