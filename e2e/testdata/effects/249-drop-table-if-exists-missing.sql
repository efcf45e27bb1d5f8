--@ writes: new
DROP TABLE IF EXISTS {{new}}
