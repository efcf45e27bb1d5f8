--@ writes: trig kv
--@ indirect: kv
INSERT INTO {{trig}} VALUES ({{n}}, 0); UPDATE {{trig}} SET v = {{n}} WHERE id = {{n}}
