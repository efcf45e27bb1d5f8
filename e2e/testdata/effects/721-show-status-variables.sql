--@ writes:
SHOW SESSION STATUS LIKE 'Com_select'; SHOW VARIABLES LIKE 'version'
