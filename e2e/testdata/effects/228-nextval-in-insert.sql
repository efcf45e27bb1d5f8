--@ writes: log seq
INSERT INTO {{log}} (msg) VALUES (NEXTVAL({{seq}}))
