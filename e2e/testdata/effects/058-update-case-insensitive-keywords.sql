--@ writes: kv
update {{kv}} set v = {{n}} where id = 1
