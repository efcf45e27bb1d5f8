--@ writes: kv
INSERT INTO {{kv}} VALUES ({{n}}, 0); SET STATEMENT max_statement_time = 0 FOR SET STATEMENT long_query_time = 1 FOR DELETE FROM {{kv}} WHERE id = {{n}}
