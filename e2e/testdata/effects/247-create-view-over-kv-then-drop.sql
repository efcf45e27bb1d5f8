--@ writes: new
CREATE VIEW {{new}} AS SELECT * FROM {{kv}}; DROP VIEW {{new}}
