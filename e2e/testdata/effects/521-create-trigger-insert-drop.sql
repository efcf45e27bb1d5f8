--@ writes: log other
--@ indirect: other
--@ conservative
CREATE TRIGGER {{prog}} AFTER INSERT ON {{log}} FOR EACH ROW UPDATE {{other}} SET v = NEW.id WHERE id = 3; INSERT INTO {{log}} (msg) VALUES ('t{{n}}'); DROP TRIGGER {{prog}}
