--@ writes: kv
BEGIN NOT ATOMIC DO f_kv({{n}}); END
