--@ writes: other
SELECT id, v INTO @a, @b FROM {{kv}} LIMIT 1; UPDATE {{other}} SET v = @b + {{n}} WHERE id = 1
