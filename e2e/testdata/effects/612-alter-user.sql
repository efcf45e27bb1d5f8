--@ writes:
CREATE USER {{newuser}}; ALTER USER {{newuser}} ACCOUNT LOCK; DROP USER {{newuser}}
