--@ writes:
GRANT EXECUTE ON PROCEDURE {{db}}.p_read TO {{user}}; REVOKE EXECUTE ON PROCEDURE {{db}}.p_read FROM {{user}}
