--@ writes:
--@ conservative
CHECKSUM TABLE {{kv}}
