--@ writes: db2.new
CREATE TABLE {{db2}}.{{new}} (id INT PRIMARY KEY); DROP TABLE {{db2}}.{{new}}
