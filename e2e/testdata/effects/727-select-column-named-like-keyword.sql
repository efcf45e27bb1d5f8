--@ writes:
SELECT id AS `update`, v AS `delete` FROM {{kv}}
