--@ writes: kv
SET STATEMENT sql_mode = '' FOR REPLACE INTO {{kv}} VALUES (2, {{n}})
