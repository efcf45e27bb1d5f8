--@ writes: other
TRUNCATE TABLE {{other}}; INSERT INTO {{other}} VALUES (1, 0), (2, 0), (3, 0)
