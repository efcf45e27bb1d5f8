--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 0); DELETE FROM {{kv}} USING {{kv}} JOIN {{other}} ON {{other}}.id = 1 WHERE {{kv}}.id = {{n}}
