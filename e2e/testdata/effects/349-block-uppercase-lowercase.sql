--@ writes: kv
begin not atomic declare x int default 1; if x then update {{kv}} SET v = {{n}} WHERE id = 1; end if; end
