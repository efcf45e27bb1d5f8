--@ writes:
EXECUTE IMMEDIATE 'GRANT SELECT ON {{db}}.{{log}} TO {{role}}'
