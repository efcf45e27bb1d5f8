--@ writes: seq
SELECT NEXT VALUE FOR {{seq}}
