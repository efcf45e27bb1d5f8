--@ writes:
SELECT 1 /*M!101120 ; UPDATE {{kv}} SET v = {{n}} WHERE id = 1 */
