--@ writes: kv
BEGIN NOT ATOMIC CALL p_kv({{n}}); END
