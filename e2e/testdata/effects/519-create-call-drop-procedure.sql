--@ writes: kv
CREATE PROCEDURE {{prog}}(x BIGINT) BEGIN UPDATE {{kv}} SET v = x WHERE id = 1; END; CALL {{prog}}({{n}}); DROP PROCEDURE {{prog}}
