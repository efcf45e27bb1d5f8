--@ writes: new
CREATE TABLE {{new}} LIKE {{other}}; INSERT INTO {{new}} SELECT * FROM {{other}}; DROP TABLE {{new}}
