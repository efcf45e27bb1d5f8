--@ writes: new
CREATE TABLE {{new}} AS SELECT * FROM {{kv}}; DROP TABLE {{new}}
