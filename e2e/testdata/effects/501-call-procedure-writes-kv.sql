--@ writes: kv
--@ piece
CALL p_kv({{n}})
