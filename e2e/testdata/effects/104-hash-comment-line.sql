--@ writes: kv
# a note; with a semicolon
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
