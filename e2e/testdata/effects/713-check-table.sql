--@ writes:
CHECK TABLE {{kv}}
