--@ writes:
SELECT 1; GRANT SELECT ON {{db}}.{{other}} TO {{user}}
