--@ writes: kv
--@ indirect: kv
INSERT INTO {{kvview}} VALUES ({{n}}, 1)
