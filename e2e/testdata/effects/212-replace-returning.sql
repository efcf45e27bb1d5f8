--@ writes: kv
--@ piece
REPLACE INTO {{kv}} VALUES (1, {{n}}) RETURNING id, v
