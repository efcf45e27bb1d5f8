--@ writes: kv
CALL p_kv({{n}})
