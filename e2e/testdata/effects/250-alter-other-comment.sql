--@ writes: other
--@ piece
ALTER TABLE {{other}} COMMENT = 'c{{n}}'
