--@ writes: kv
--@ piece
SELECT f_kv({{n}})
