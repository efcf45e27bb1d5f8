--@ writes: other
CREATE INDEX iv ON {{other}} (v); DROP INDEX iv ON {{other}}
