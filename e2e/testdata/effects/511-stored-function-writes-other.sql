--@ writes: other
--@ conservative
SELECT f_other({{n}})
