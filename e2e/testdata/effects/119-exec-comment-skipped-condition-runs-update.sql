--@ writes: kv
UPDATE {{kv}} SET v = {{n}} WHERE id = 1 /*!50700 AND 0 */
