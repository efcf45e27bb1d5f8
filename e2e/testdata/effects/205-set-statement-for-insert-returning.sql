--@ writes: kv
SET STATEMENT max_statement_time = 0 FOR INSERT INTO {{kv}} VALUES ({{n}}, 0) RETURNING id
