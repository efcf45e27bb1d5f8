--@ writes: kv other
CALL p_other(f_kv({{n}}))
