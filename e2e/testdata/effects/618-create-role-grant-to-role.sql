--@ writes:
CREATE ROLE {{newrole}}; GRANT SELECT ON {{db}}.{{kv}} TO {{newrole}}; GRANT {{newrole}} TO {{user}}; DROP ROLE {{newrole}}
