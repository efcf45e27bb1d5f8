--@ writes: trigo other
--@ indirect: other
--@ piece
INSERT INTO {{trigo}} VALUES ({{n}}, {{n}})
