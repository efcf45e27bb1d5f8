--@ writes: kv
/*!40101 SELECT 1 */; /*M!100000 SELECT 2 */; /* x */ SELECT 3; # y
UPDATE {{kv}} SET v = {{n}} WHERE id = 1
