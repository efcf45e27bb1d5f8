--@ writes:
--@ conservative
--@ note: a stored function the account cannot see into
SELECT f_pure(1)
