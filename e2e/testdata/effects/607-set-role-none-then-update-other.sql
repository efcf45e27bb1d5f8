--@ writes: other
SET ROLE NONE; UPDATE {{other}} SET v = {{n}} WHERE id = 1
