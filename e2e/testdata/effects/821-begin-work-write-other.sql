--@ writes: other
--@ note: BEGIN WORK and COMMIT WORK are MariaDB's (and MySQL's) too
BEGIN WORK; UPDATE {{other}} SET v = {{n}} WHERE id = 1; COMMIT WORK
