--@ writes: other
UPDATE /*!99999 {{kv}} */ /*!40101 {{other}} */ SET v = {{n}} WHERE id = 1
