--@ writes:
/*!99999 SELECT 1, */ GRANT SELECT ON {{db}}.{{other}} TO {{user}}
