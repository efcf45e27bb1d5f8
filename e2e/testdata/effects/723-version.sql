--@ writes:
SELECT VERSION(); SELECT @@version
