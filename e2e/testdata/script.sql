-- A shop's maintenance script, run by the mariadb client directly and
-- through tableproxy; the two outputs must be identical. It must be
-- deterministic: no NOW(), RAND(), CONNECTION_ID() or server-specific paths.

CREATE TABLE items (
  id        INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name      VARCHAR(20) NOT NULL,
  price     DECIMAL(30,10),
  qty       SMALLINT,
  big       BIGINT UNSIGNED,
  flags     BIT(10),
  kind      ENUM('tool','toy','food'),
  tags      SET('red','green','blue'),
  made      DATETIME(6),
  doc       JSON,
  photo     BLOB,
  note      TEXT CHARACTER SET utf8mb4,
  ratio     FLOAT,
  weight    DOUBLE,
  since     YEAR,
  opens     TIME(3),
  sold_on   DATE,
  UNIQUE KEY name_kind (name, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO items (name, price, qty, big, flags, kind, tags, made, doc, photo, note, ratio, weight, since, opens, sold_on) VALUES
  ('saw', 19.9900000001, 4, 18446744073709551615, b'1010101010', 'tool', 'red,blue',
   '2024-02-29 23:59:59.999999', '{"sizes": [1, 2.5, "XL"], "ok": true, "none": null}',
   x'00FF10275C0A0D1A', 'sharp 🪚 — handle with care', 0.5, 1e-300, 2024, '-12:30:00.125', '2024-03-01'),
  ('ball', 3.5, 10, 0, b'0000000001', 'toy', '', '1970-01-01 00:00:00.000001',
   '[]', '', 'round', -1.25, 6.02214076e23, 1901, '838:59:59', '1000-01-01'),
  ('bread', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

-- Warnings: a value too long and one out of range, outside strict mode.
SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION';
INSERT INTO items (name, qty, kind) VALUES ('a name that is far too long for the column', 99999, 'food');
SHOW WARNINGS;
SET SESSION sql_mode = DEFAULT;

DELETE FROM items WHERE name LIKE 'a name%';
UPDATE items SET qty = qty + 1 WHERE qty IS NOT NULL;
UPDATE items SET qty = qty WHERE id = 1;
INSERT INTO items (name, kind, qty) VALUES ('ball', 'toy', 1) ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty);
REPLACE INTO items (id, name, kind) VALUES (3, 'bread', 'food');

DELIMITER //
CREATE PROCEDURE stock(IN min_qty INT, OUT total DECIMAL(30,10))
BEGIN
  SELECT id, name, qty FROM items WHERE qty >= min_qty ORDER BY id;
  SELECT kind, COUNT(*) AS n, SUM(price) AS value FROM items GROUP BY kind ORDER BY kind;
  SELECT SUM(price) INTO total FROM items;
END//
DELIMITER ;

CALL stock(5, @total);
SELECT @total AS total;
SHOW WARNINGS;

SET @a = 41, @b = 'forty-two', @c = NULL, @d = 0.1 + 0.2;
SELECT @a + 1 AS a, CONCAT(@b, '!') AS b, @c IS NULL AS c_is_null, @d AS d, @undefined AS u;

START TRANSACTION;
INSERT INTO items (name, kind) VALUES ('ghost', 'toy');
SELECT COUNT(*) AS in_tx FROM items;
ROLLBACK;
SELECT COUNT(*) AS after_rollback FROM items;

CREATE TEMPORARY TABLE scratch (k VARCHAR(10) PRIMARY KEY, v DOUBLE);
INSERT INTO scratch VALUES ('pi', 3.141592653589793), ('e', 2.718281828459045);
SELECT * FROM scratch ORDER BY k;
DROP TEMPORARY TABLE scratch;

-- Errors the client reports and, under --force, continues past.
SELECT * FROM no_such_table;
INSERT INTO items (id, name) VALUES (1, 'duplicate');
SELEC 1;
SELECT 'still connected' AS status;

LOAD DATA LOCAL INFILE 'testdata/items.tsv' INTO TABLE items CHARACTER SET utf8mb4
  FIELDS TERMINATED BY '\t' (name, price, qty, kind);
SHOW WARNINGS;

SELECT * FROM items ORDER BY id;
SELECT id, HEX(photo) AS photo_hex, LENGTH(note) AS bytes, CHAR_LENGTH(note) AS chars, flags + 0 AS flag_bits, BIN(flags) AS flag_str
  FROM items ORDER BY id;
SELECT JSON_EXTRACT(doc, '$.sizes[1]') AS size, JSON_TYPE(doc) AS type, JSON_VALID(doc) AS valid FROM items WHERE doc IS NOT NULL ORDER BY id;
SELECT 18446744073709551615 AS u64_max, -9223372036854775808 AS i64_min,
  CAST(1 AS DECIMAL(30,10)) / 3 AS third, 1e308 AS big_double,
  CAST('2038-01-19 03:14:07.999999' AS DATETIME(6)) AS dt, NULL AS nothing, '😀🎉' AS emoji, _binary 'bytes' AS bin;
SELECT kind, GROUP_CONCAT(name ORDER BY name SEPARATOR '|') AS names FROM items GROUP BY kind WITH ROLLUP;
SHOW CREATE TABLE items;
