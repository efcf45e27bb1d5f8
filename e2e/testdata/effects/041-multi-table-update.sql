--@ writes: kv
--@ piece
UPDATE {{kv}} JOIN {{other}} ON {{kv}}.id = {{other}}.id SET {{kv}}.v = {{n}} WHERE {{kv}}.id = 1
