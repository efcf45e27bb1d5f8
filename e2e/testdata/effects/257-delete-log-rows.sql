--@ writes: log
--@ piece
DELETE FROM {{log}} WHERE id < {{n}}
