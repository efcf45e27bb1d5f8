--@ writes:
CREATE USER {{newuser}} IDENTIFIED BY 'pw'; DROP USER {{newuser}}
