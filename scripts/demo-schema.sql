-- Sample schema for the tableproxy demo: a small retail business with
-- branches, currencies and exchange rates, products, customers and orders.
--
-- scripts/demo.sh loads it into the `demo` database:
--   mariadb demo < scripts/demo-schema.sql
--
-- The data is generated in SQL and is deterministic, so every load produces
-- the same rows. Column types are deliberately varied (INT, BIGINT, DECIMAL,
-- DOUBLE, utf8mb4 text, DATE, TIME, DATETIME(6), JSON, BINARY, ENUM, NULLs)
-- to exercise the wire protocol in both text and binary result formats.

SET NAMES utf8mb4;
SET foreign_key_checks = 0;

DROP TABLE IF EXISTS order_items;
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS customers;
DROP TABLE IF EXISTS products;
DROP TABLE IF EXISTS exchange_rates;
DROP TABLE IF EXISTS currencies;
DROP TABLE IF EXISTS branches;
DROP TABLE IF EXISTS seq_numbers;
-- audit_log, and what online ADD INDEX jobs on it leave: each job's kept
-- original (audit_log__old_<job>_<start>, until old_table_retention ends)
-- and its shadow, had the proxy been stopped in a job.
DROP TABLE IF EXISTS audit_log;
SET @drop_jobs_tables = (
  SELECT IFNULL(CONCAT('DROP TABLE IF EXISTS ', GROUP_CONCAT(CONCAT('`', TABLE_NAME, '`'))), 'DO 0')
  FROM information_schema.TABLES
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME REGEXP '^audit_log__(old_|new_|o[0-9]|n[0-9])');
PREPARE drop_jobs_tables FROM @drop_jobs_tables;
EXECUTE drop_jobs_tables;
DEALLOCATE PREPARE drop_jobs_tables;

SET foreign_key_checks = 1;

CREATE TABLE branches (
  id            INT UNSIGNED NOT NULL AUTO_INCREMENT,
  code          VARCHAR(8) NOT NULL,
  name          VARCHAR(100) NOT NULL,
  city          VARCHAR(80) NOT NULL,
  country       CHAR(2) NOT NULL,
  timezone      VARCHAR(40) NOT NULL,
  opens_at      TIME NOT NULL,
  closes_at     TIME NOT NULL,
  opened_on     DATE NOT NULL,
  manager_email VARCHAR(255) NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_branches_code (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO branches (code, name, city, country, timezone, opens_at, closes_at, opened_on, manager_email) VALUES
  ('LON1', 'London Shoreditch',      'London',     'GB', 'Europe/London',     '09:00', '19:00', '2015-03-02', 'amelia.clarke@example.com'),
  ('PAR1', 'Paris Rive Gauche',      'Paris',      'FR', 'Europe/Paris',      '10:00', '20:00', '2016-09-15', 'chloé.moreau@example.com'),
  ('MUC1', 'München Schwabing',      'München',    'DE', 'Europe/Berlin',     '09:30', '19:30', '2017-04-01', NULL),
  ('ZRH1', 'Zürich Oerlikon',        'Zürich',     'CH', 'Europe/Zurich',     '09:00', '18:30', '2018-01-08', 'lukas.müller@example.com'),
  ('NYC1', 'New York SoHo',          'New York',   'US', 'America/New_York',  '08:00', '21:00', '2016-05-20', 'jordan.lee@example.com'),
  ('SAO1', 'São Paulo Jardins',      'São Paulo',  'BR', 'America/Sao_Paulo', '09:00', '20:00', '2019-07-11', 'joão.silva@example.com'),
  ('TYO1', '東京 渋谷',               '東京',        'JP', 'Asia/Tokyo',        '10:00', '21:00', '2020-02-03', 'haruto.sato@example.com'),
  ('BLR1', 'Bengaluru Indiranagar',  'Bengaluru',  'IN', 'Asia/Kolkata',      '10:00', '22:00', '2022-10-24', NULL);

CREATE TABLE currencies (
  code     CHAR(3) NOT NULL,
  name     VARCHAR(64) NOT NULL,
  symbol   VARCHAR(8) NOT NULL,
  decimals TINYINT UNSIGNED NOT NULL DEFAULT 2,
  PRIMARY KEY (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO currencies (code, name, symbol, decimals) VALUES
  ('USD', 'US Dollar',         '$',  2),
  ('EUR', 'Euro',              '€',  2),
  ('GBP', 'Pound Sterling',    '£',  2),
  ('CHF', 'Swiss Franc',       'Fr', 2),
  ('JPY', 'Japanese Yen',      '¥',  0),
  ('BRL', 'Brazilian Real',    'R$', 2),
  ('INR', 'Indian Rupee',      '₹',  2);

-- Helper table of the numbers 1..1000, used to generate rows and dropped at
-- the end. A plain table (not TEMPORARY) because it is joined with itself.
CREATE TABLE seq_numbers (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB;
INSERT INTO seq_numbers (n)
SELECT 1 + d0.d + 10 * d1.d + 100 * d2.d
FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d0
CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d1
CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d2;

CREATE TABLE exchange_rates (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  base       CHAR(3) NOT NULL,
  quote      CHAR(3) NOT NULL,
  rate       DECIMAL(18,8) NOT NULL,
  valid_from DATETIME(6) NOT NULL,
  source     VARCHAR(32) NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_rates_pair_time (base, quote, valid_from),
  CONSTRAINT fk_rates_base FOREIGN KEY (base) REFERENCES currencies (code),
  CONSTRAINT fk_rates_quote FOREIGN KEY (quote) REFERENCES currencies (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- 30 daily USD-based rates per currency, with a small deterministic wobble.
INSERT INTO exchange_rates (base, quote, rate, valid_from, source)
SELECT 'USD', c.code,
       ROUND(CASE c.code
               WHEN 'EUR' THEN 0.92 WHEN 'GBP' THEN 0.79 WHEN 'CHF' THEN 0.88
               WHEN 'JPY' THEN 151.30 WHEN 'BRL' THEN 5.05 ELSE 83.40
             END * (1 + ((s.n * 37 + CHAR_LENGTH(c.name) * 11) % 41 - 20) / 2000), 8),
       TIMESTAMP('2024-05-01 00:00:00') + INTERVAL (s.n - 1) DAY + INTERVAL (s.n * 7919) % 1000000 MICROSECOND,
       IF(s.n % 9 = 0, NULL, ELT(1 + s.n % 2, 'ecb', 'market-close'))
FROM currencies c
CROSS JOIN seq_numbers s
WHERE c.code <> 'USD' AND s.n <= 30;

CREATE TABLE products (
  id              INT UNSIGNED NOT NULL AUTO_INCREMENT,
  sku             VARCHAR(32) NOT NULL,
  name            VARCHAR(200) NOT NULL,
  category        VARCHAR(50) NOT NULL,
  price           DECIMAL(12,2) NOT NULL,
  currency        CHAR(3) NOT NULL DEFAULT 'USD',
  weight_grams    INT UNSIGNED NULL,
  rating          DOUBLE NULL,
  attributes      JSON NULL,
  checksum        BINARY(20) NOT NULL,
  is_active       TINYINT(1) NOT NULL DEFAULT 1,
  created_at      DATETIME(6) NOT NULL,
  updated_at      DATETIME(6) NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_products_sku (sku),
  KEY idx_products_category (category, price),
  CONSTRAINT fk_products_currency FOREIGN KEY (currency) REFERENCES currencies (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO products (sku, name, category, price, currency, weight_grams, rating, attributes, checksum, is_active, created_at, updated_at)
SELECT CONCAT('SKU-', LPAD(s.n, 5, '0')),
       CONCAT(ELT(1 + s.n % 8, 'Classic', 'Deluxe', 'Eco', 'Compact', 'Pro', 'Mini', 'Ultra', 'Café'), ' ',
              ELT(1 + (s.n DIV 8) % 10, 'Mug', 'Backpack', 'Notebook', 'Desk Lamp', 'Headphones',
                  'Water Bottle', 'T-Shirt', 'Umbrella', 'Kettle', 'Chair'),
              IF(s.n % 25 = 0, ' ☕', ''), ' #', s.n),
       ELT(1 + (s.n DIV 8) % 10, 'kitchen', 'bags', 'stationery', 'lighting', 'audio',
           'kitchen', 'apparel', 'accessories', 'kitchen', 'furniture'),
       ROUND(4.99 + (s.n * 7919 % 25000) / 100, 2),
       'USD',
       IF(s.n % 11 = 0, NULL, 50 + (s.n * 131) % 4950),
       IF(s.n % 7 = 0, NULL, ROUND(1 + ((s.n * 53) % 400) / 100, 2)),
       IF(s.n % 5 = 0, NULL,
          JSON_OBJECT('color', ELT(1 + s.n % 5, 'black', 'white', 'red', 'blue', 'green'),
                      'tags', JSON_ARRAY(ELT(1 + s.n % 3, 'new', 'sale', 'bestseller'), 'demo'),
                      'dimensions_cm', JSON_OBJECT('w', 5 + s.n % 40, 'h', 3 + s.n % 25, 'd', 1 + s.n % 15))),
       UNHEX(SHA1(CONCAT('SKU-', s.n))),
       IF(s.n % 17 = 0, 0, 1),
       TIMESTAMP('2023-01-01 08:00:00') + INTERVAL (s.n * 104729) % 31536000 SECOND + INTERVAL (s.n * 7919) % 1000000 MICROSECOND,
       IF(s.n % 3 = 0, NULL, TIMESTAMP('2024-03-01 12:00:00') + INTERVAL (s.n * 15485863) % 7776000 SECOND + INTERVAL (s.n * 31) % 1000000 MICROSECOND)
FROM seq_numbers s
WHERE s.n <= 200;

CREATE TABLE customers (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  email         VARCHAR(255) NOT NULL,
  full_name     VARCHAR(200) NOT NULL,
  phone         VARCHAR(32) NULL,
  branch_id     INT UNSIGNED NOT NULL,
  country       CHAR(2) NOT NULL,
  date_of_birth DATE NULL,
  credit_limit  DECIMAL(14,2) NOT NULL DEFAULT 0.00,
  loyalty_score DOUBLE NULL,
  preferences   JSON NULL,
  created_at    DATETIME(6) NOT NULL,
  last_login_at DATETIME(6) NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_customers_email (email),
  KEY idx_customers_branch (branch_id),
  CONSTRAINT fk_customers_branch FOREIGN KEY (branch_id) REFERENCES branches (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO customers (email, full_name, phone, branch_id, country, date_of_birth, credit_limit, loyalty_score, preferences, created_at, last_login_at)
SELECT CONCAT('customer', s.n, '@example.com'),
       CONCAT(ELT(1 + s.n % 12, 'Olivia', 'Noah', 'Zoë', 'Mateo', 'Aiko', 'Liam', 'Søren', 'Priya',
                  'François', 'Amara', 'Björn', 'Ana'), ' ',
              ELT(1 + (s.n * 7) % 11, 'Smith', 'García', 'Müller', 'Dubois', 'Tanaka', 'Kowalski',
                  'O''Brien', 'Rossi', 'Nakamura', 'Fernández', 'Øvergaard')),
       IF(s.n % 6 = 0, NULL, CONCAT('+', 10 + s.n % 89, ' ', LPAD((s.n * 7919) % 100000000, 8, '0'))),
       b.id,
       b.country,
       IF(s.n % 8 = 0, NULL, DATE('1950-01-01') + INTERVAL (s.n * 104729) % 20000 DAY),
       ROUND(((s.n * 613) % 50) * 100, 2),
       IF(s.n % 10 = 0, NULL, ((s.n * 2654435761) % 100000) / 1000),
       IF(s.n % 4 = 0, NULL,
          JSON_OBJECT('newsletter', s.n % 2 = 0,
                      'language', ELT(1 + s.n % 6, 'en', 'fr', 'de', 'ja', 'pt', 'hi'),
                      'channels', JSON_ARRAY('email', IF(s.n % 3 = 0, 'sms', 'push')))),
       TIMESTAMP('2022-01-01 00:00:00') + INTERVAL (s.n * 86413) % 63072000 SECOND + INTERVAL (s.n * 104729) % 1000000 MICROSECOND,
       IF(s.n % 5 = 0, NULL, TIMESTAMP('2024-06-01 00:00:00') + INTERVAL (s.n * 3571) % 2592000 SECOND + INTERVAL (s.n * 17) % 1000000 MICROSECOND)
FROM seq_numbers s
JOIN branches b ON b.id = 1 + (s.n * 5) % 8
WHERE s.n <= 300;

CREATE TABLE orders (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  customer_id  BIGINT UNSIGNED NOT NULL,
  branch_id    INT UNSIGNED NOT NULL,
  status       ENUM('pending', 'paid', 'shipped', 'cancelled', 'refunded') NOT NULL DEFAULT 'pending',
  currency     CHAR(3) NOT NULL,
  total_amount DECIMAL(14,2) NOT NULL DEFAULT 0.00,
  ordered_at   DATETIME(6) NOT NULL,
  shipped_at   DATETIME(6) NULL,
  notes        TEXT NULL,
  PRIMARY KEY (id),
  KEY idx_orders_customer (customer_id, ordered_at),
  KEY idx_orders_status (status, ordered_at),
  CONSTRAINT fk_orders_customer FOREIGN KEY (customer_id) REFERENCES customers (id),
  CONSTRAINT fk_orders_branch FOREIGN KEY (branch_id) REFERENCES branches (id),
  CONSTRAINT fk_orders_currency FOREIGN KEY (currency) REFERENCES currencies (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO orders (customer_id, branch_id, status, currency, ordered_at, shipped_at, notes)
SELECT c.id,
       c.branch_id,
       ELT(1 + (s.n * 13) % 10, 'paid', 'shipped', 'shipped', 'shipped', 'pending',
           'paid', 'shipped', 'cancelled', 'shipped', 'refunded'),
       ELT(c.branch_id, 'GBP', 'EUR', 'EUR', 'CHF', 'USD', 'BRL', 'JPY', 'INR'),
       TIMESTAMP('2024-01-01 00:00:00') + INTERVAL (s.n * 104723) % 15552000 SECOND + INTERVAL (s.n * 7907) % 1000000 MICROSECOND,
       NULL,
       CASE WHEN s.n % 19 = 0 THEN 'Gift wrap, please 🎁'
            WHEN s.n % 23 = 0 THEN 'Leave at the front desk'
            WHEN s.n % 29 = 0 THEN ''
            ELSE NULL END
FROM seq_numbers s
JOIN customers c ON c.id = 1 + (s.n * 7) % 300
WHERE s.n <= 500;

UPDATE orders
SET shipped_at = ordered_at + INTERVAL 1 + id % 5 DAY + INTERVAL (id * 3181) % 86400 SECOND
WHERE status IN ('shipped', 'refunded');

CREATE TABLE order_items (
  order_id   BIGINT UNSIGNED NOT NULL,
  line_no    SMALLINT UNSIGNED NOT NULL,
  product_id INT UNSIGNED NOT NULL,
  quantity   INT UNSIGNED NOT NULL,
  unit_price DECIMAL(12,2) NOT NULL,
  discount   DECIMAL(5,2) NULL,
  PRIMARY KEY (order_id, line_no),
  KEY idx_order_items_product (product_id),
  CONSTRAINT fk_items_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE,
  CONSTRAINT fk_items_product FOREIGN KEY (product_id) REFERENCES products (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One to four lines per order.
INSERT INTO order_items (order_id, line_no, product_id, quantity, unit_price, discount)
SELECT o.id,
       l.n,
       p.id,
       1 + (o.id * 3 + l.n) % 4,
       p.price,
       IF((o.id + l.n) % 6 = 0, 10.00, NULL)
FROM orders o
JOIN seq_numbers l ON l.n <= 1 + o.id % 4
JOIN products p ON p.id = 1 + (o.id * 37 + l.n * 101) % 200;

-- Order totals in the order's currency, converted with the latest rate and
-- rounded to that currency's minor unit.
UPDATE orders o
JOIN (SELECT order_id, SUM(quantity * unit_price * (1 - COALESCE(discount, 0) / 100)) AS usd_total
      FROM order_items GROUP BY order_id) t ON t.order_id = o.id
JOIN currencies cur ON cur.code = o.currency
LEFT JOIN (SELECT quote, rate FROM exchange_rates
           WHERE valid_from >= '2024-05-30') r ON r.quote = o.currency
SET o.total_amount = ROUND(t.usd_total * COALESCE(r.rate, 1), cur.decimals);

-- An append-only log without foreign keys, 500,000 rows (over the 16MB
-- under which the default strategy leaves an index to the backend): a table
-- to try online ADD INDEX on (ALTER TABLE audit_log ADD INDEX (actor, at)).
CREATE TABLE audit_log (
  id     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  actor  VARCHAR(32) NOT NULL,
  action VARCHAR(32) NOT NULL,
  at     DATETIME(6) NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO audit_log (actor, action, at)
SELECT CONCAT('user', (a.n * 7 + b.n) % 50),
       ELT(1 + (a.n + b.n) % 4, 'login', 'view', 'update', 'logout'),
       '2024-01-01' + INTERVAL (a.n * 500 + b.n) MINUTE
FROM seq_numbers a JOIN seq_numbers b ON b.n <= 500;

DROP TABLE seq_numbers;

ANALYZE TABLE branches, currencies, exchange_rates, products, customers, orders, order_items, audit_log;
