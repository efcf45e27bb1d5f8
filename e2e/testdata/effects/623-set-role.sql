--@ writes:
--@ piece
SET ROLE {{role}}
