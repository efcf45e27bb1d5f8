--@ writes:
CREATE OR REPLACE USER {{newuser}}; DROP USER IF EXISTS {{newuser}}
