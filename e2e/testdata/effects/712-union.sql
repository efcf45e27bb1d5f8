--@ writes:
--@ piece
SELECT id FROM {{kv}} UNION SELECT id FROM {{other}}
