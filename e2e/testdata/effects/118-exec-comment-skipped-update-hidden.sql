--@ writes:
SELECT 1 /*!99999 ; UPDATE {{kv}} SET v = 999 WHERE id = 1 */
