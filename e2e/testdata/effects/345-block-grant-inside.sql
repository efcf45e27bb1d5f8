--@ writes:
BEGIN NOT ATOMIC GRANT SELECT ON {{db}}.{{other}} TO {{user}}; REVOKE SELECT ON {{db}}.{{other}} FROM {{user}}; END
