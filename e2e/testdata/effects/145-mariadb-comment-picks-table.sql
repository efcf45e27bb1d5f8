--@ writes: other
UPDATE /*M!999999 {{kv}} */ /*M!100000 {{other}} */ SET v = {{n}} WHERE id = 1
