--@ writes:
--@ conservative
--@ note: HANDLER is read lexically as unknown
HANDLER {{kv}} OPEN; HANDLER {{kv}} READ FIRST; HANDLER {{kv}} CLOSE
