--@ writes:
--@ piece
SELECT 1
