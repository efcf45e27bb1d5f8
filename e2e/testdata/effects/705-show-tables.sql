--@ writes:
--@ piece
SHOW TABLES
