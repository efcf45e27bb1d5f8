--@ writes: log
INSERT INTO {{log}} (msg) VALUES ('x{{n}}') /*M!100500 RETURNING id */
