--@ writes: kv
/* a note */ UPDATE {{kv}} SET v = {{n}} WHERE id = 1
