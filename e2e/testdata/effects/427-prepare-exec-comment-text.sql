--@ writes: kv
PREPARE s FROM '/*M!100100 UPDATE {{kv}} SET v = ? WHERE id = 1 */'; EXECUTE s USING {{n}}
