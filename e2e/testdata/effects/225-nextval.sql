--@ writes: seq
--@ piece
SELECT NEXTVAL({{seq}})
