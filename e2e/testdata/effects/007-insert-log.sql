--@ writes: log
--@ piece
INSERT INTO {{log}} (msg) VALUES ('row {{n}}')
