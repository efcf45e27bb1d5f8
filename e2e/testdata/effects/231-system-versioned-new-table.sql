--@ writes: new
CREATE TABLE {{new}} (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING; INSERT INTO {{new}} VALUES (1, 1); UPDATE {{new}} SET v = 2; DROP TABLE {{new}}
