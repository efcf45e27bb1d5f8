--@ writes:
CREATE ROLE {{newrole}}; DROP ROLE {{newrole}}
