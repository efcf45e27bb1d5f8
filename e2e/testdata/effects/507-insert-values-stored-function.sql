--@ writes: kv other
INSERT INTO {{other}} VALUES ({{n}}, f_kv({{n}}))
