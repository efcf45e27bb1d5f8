--@ writes:
CREATE USER {{newuser}}; RENAME USER {{newuser}} TO {{newuser2}}; DROP USER {{newuser2}}
