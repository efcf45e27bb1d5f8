--@ writes: new
--@ piece
CREATE TABLE {{new}} (id INT PRIMARY KEY, v INT)
