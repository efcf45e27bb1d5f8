--@ writes: trig kv
--@ indirect: kv
INSERT INTO {{trig}} VALUES ({{n}}, {{n}})
