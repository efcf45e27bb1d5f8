--@ writes:
CREATE USER {{newuser}}; SET PASSWORD FOR {{newuser}} = PASSWORD('other-pw'); DROP USER {{newuser}}
