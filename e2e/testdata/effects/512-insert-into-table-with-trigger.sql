--@ writes: trig kv
--@ indirect: kv
--@ piece
INSERT INTO {{trig}} VALUES ({{n}}, {{n}})
