--@ writes: other
--@ conservative
UPDATE {{other}} JOIN {{kv}} ON {{kv}}.id = {{other}}.id SET {{other}}.v = {{n}} WHERE {{other}}.id = 1
