--@ writes: kv
REPLACE INTO {{kv}} SELECT 1, {{n}}
