--@ writes:
--@ piece
SET @g = {{n}}
