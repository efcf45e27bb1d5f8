--@ writes: kv
BEGIN NOT ATOMIC FOR r IN (SELECT id FROM {{other}} ORDER BY id) DO UPDATE {{kv}} SET v = {{n}} + r.id WHERE id = r.id; END FOR; END
