--@ writes: seq
ALTER SEQUENCE {{seq}} RESTART WITH {{n}}
