--@ writes: kv
XA START 'y{{n}}'; UPDATE {{kv}} SET v = {{n}} WHERE id = 1; XA END 'y{{n}}'; XA COMMIT 'y{{n}}' ONE PHASE
