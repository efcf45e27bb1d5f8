--@ writes:
GRANT INSERT ON {{db}}.{{other}} TO {{user}}
--@ next
REVOKE INSERT ON {{db}}.{{other}} FROM {{user}}
