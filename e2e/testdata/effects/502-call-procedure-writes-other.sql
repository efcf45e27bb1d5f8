--@ writes: other
--@ conservative
--@ note: the account cannot see into a procedure
--@ piece
CALL p_other({{n}})
