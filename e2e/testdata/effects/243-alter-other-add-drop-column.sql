--@ writes: other
ALTER TABLE {{other}} ADD COLUMN c INT; ALTER TABLE {{other}} DROP COLUMN c
