--@ writes: vers
UPDATE {{vers}} SET v = {{n}} WHERE id = 1; DELETE HISTORY FROM {{vers}}
