--@ writes: other
--@ conservative
--@ note: ANALYZE TABLE is a statement the account does not follow
ANALYZE TABLE {{other}}
