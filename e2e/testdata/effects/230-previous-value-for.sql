--@ writes:
--@ conservative
--@ note: the parser does not read PREVIOUS VALUE FOR
SELECT PREVIOUS VALUE FOR {{seq}}
