--@ writes:
--@ conservative
CALL p_read()
