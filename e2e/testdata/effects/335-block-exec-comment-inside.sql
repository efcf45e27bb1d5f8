--@ writes: kv
BEGIN NOT ATOMIC /*!99999 SELECT 1; */ /*!40101 UPDATE {{kv}} SET v = {{n}} WHERE id = 1; */ END
