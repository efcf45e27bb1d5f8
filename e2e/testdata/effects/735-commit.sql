--@ writes:
--@ piece
COMMIT
