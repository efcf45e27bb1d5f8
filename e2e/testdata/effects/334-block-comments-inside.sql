--@ writes: kv
BEGIN NOT ATOMIC -- a; note
  # another; note
  /* third; */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1; END
