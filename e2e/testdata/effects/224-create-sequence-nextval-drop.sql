--@ writes: new
CREATE SEQUENCE {{new}} CACHE 0; SELECT NEXTVAL({{new}}); DROP SEQUENCE {{new}}
