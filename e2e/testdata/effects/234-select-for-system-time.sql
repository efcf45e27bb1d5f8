--@ writes:
--@ conservative
--@ note: the parser does not read FOR SYSTEM_TIME
SELECT * FROM {{vers}} FOR SYSTEM_TIME ALL
