--@ writes: kv
DO f_kv({{n}})
