--@ writes: kv
SELECT 1; CALL p_kv({{n}}); SELECT 2
