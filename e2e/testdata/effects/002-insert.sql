--@ writes: kv
--@ piece
INSERT INTO {{kv}} VALUES ({{n}}, {{n}})
