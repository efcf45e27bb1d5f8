--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 0); DELETE k FROM {{kv}} AS k WHERE k.id = {{n}}
