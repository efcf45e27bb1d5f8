--@ writes:
REVOKE {{role}} FROM {{user}}; GRANT {{role}} TO {{user}}
