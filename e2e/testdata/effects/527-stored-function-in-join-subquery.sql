--@ writes: kv
SELECT o.id FROM {{other}} o JOIN (SELECT f_kv({{n}}) AS x) s ON s.x > 0
