--@ writes: kv
UPDATE `{{db}}`.`kv` SET v = {{n}} WHERE id = 1
