--@ writes: kv
XA START 'x{{n}}'; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; XA END 'x{{n}}'; XA PREPARE 'x{{n}}'; XA COMMIT 'x{{n}}'
