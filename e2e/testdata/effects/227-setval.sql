--@ writes: seq
SELECT SETVAL({{seq}}, {{n}})
