--@ writes: other
EXECUTE IMMEDIATE 'ALTER TABLE {{other}} COMMENT = ''e{{n}}'''
