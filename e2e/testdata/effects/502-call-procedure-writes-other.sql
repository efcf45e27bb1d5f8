--@ writes: other
--@ conservative
--@ note: the account cannot see into a procedure
CALL p_other({{n}})
