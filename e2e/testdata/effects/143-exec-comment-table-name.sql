--@ writes: kv
UPDATE /*!40101 {{kv}} */ /*!99999 {{other}} */ SET v = {{n}} WHERE id = 1
