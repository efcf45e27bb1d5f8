--@ writes: other
INSERT /*+ SET_VAR(sort_buffer_size = 16M) */ INTO {{other}} VALUES ({{n}}, 0)
