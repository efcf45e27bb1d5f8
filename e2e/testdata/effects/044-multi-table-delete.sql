--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 0); DELETE {{kv}} FROM {{kv}}, {{other}} WHERE {{kv}}.id = {{n}} AND {{other}}.id = 1
