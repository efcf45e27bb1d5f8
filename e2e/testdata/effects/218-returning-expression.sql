--@ writes: other
INSERT INTO {{other}} VALUES ({{n}}, 2) RETURNING id * 2 AS twice, v + 1
