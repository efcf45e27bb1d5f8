--@ writes: trigo other
--@ indirect: other
INSERT INTO {{trigo}} VALUES ({{n}}, {{n}})
