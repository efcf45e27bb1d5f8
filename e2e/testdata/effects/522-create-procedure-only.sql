--@ writes:
--@ conservative
--@ note: creating or dropping a stored program counts as anything
CREATE PROCEDURE {{prog}}() SELECT 1; DROP PROCEDURE {{prog}}
