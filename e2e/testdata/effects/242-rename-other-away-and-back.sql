--@ writes: other new
RENAME TABLE {{other}} TO {{new}}, {{new}} TO {{other}}
