--@ writes: kv
EXECUTE IMMEDIATE 'SELECT f_kv({{n}})'
