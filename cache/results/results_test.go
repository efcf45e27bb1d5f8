package results

import (
	"slices"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"

	"tableproxy/lease"
)

// TestResultShapeEligibility: which statements the result cache may
// answer, and the tables each reads.
func TestResultShapeEligibility(t *testing.T) {
	rates := lease.TableID{Schema: "shop", Table: "rates"}
	other := lease.TableID{Schema: "other", Table: "t"}
	for _, tc := range []struct {
		sql    string
		tables []lease.TableID // nil: not eligible
	}{
		{"SELECT CONCAT(code, '-', UPPER(code)) FROM rates WHERE id > 1", []lease.TableID{rates}},
		{"SELECT code, COUNT(*), SUM(rate), GROUP_CONCAT(id ORDER BY id) FROM rates GROUP BY code HAVING COUNT(*) > 0", []lease.TableID{rates}},
		{"SELECT r.code, t.x FROM rates r JOIN other.t t ON t.id = r.id ORDER BY 1", []lease.TableID{rates, other}},
		{"SELECT DISTINCT code FROM rates WHERE code LIKE 'E%' AND code REGEXP '^[A-Z]+$'", []lease.TableID{rates}},
		{"SELECT * FROM rates WHERE id IN (SELECT id FROM other.t WHERE x IS NOT NULL)", []lease.TableID{rates, other}},
		{"SELECT code FROM rates UNION SELECT x FROM other.t", []lease.TableID{rates, other}},
		{"SELECT DATE_FORMAT(d, '%W'), DATABASE(), CAST(rate AS CHAR) FROM rates", []lease.TableID{rates}},
		{"SELECT CASE WHEN id = ? THEN 'a' ELSE 'b' END, IF(rate > ?, 1, 0) FROM rates LIMIT ?", []lease.TableID{rates}},
		{"SELECT UNIX_TIMESTAMP(d) FROM rates", []lease.TableID{rates}},
		{"SELECT code COLLATE utf8mb4_bin FROM rates", []lease.TableID{rates}},

		{"SELECT 1", nil}, // no table
		{"SELECT * FROM rates FOR UPDATE", nil},
		{"SELECT * FROM rates LOCK IN SHARE MODE", nil},
		{"SELECT * FROM rates INTO OUTFILE '/tmp/x'", nil},
		{"SELECT id INTO @x FROM rates LIMIT 1", nil},
		{"SELECT SQL_CALC_FOUND_ROWS * FROM rates LIMIT 1", nil},
		{"SELECT @x, code FROM rates", nil},
		{"SELECT @@time_zone, code FROM rates", nil},
		{"SELECT NOW(), code FROM rates", nil},
		{"SELECT CURRENT_TIMESTAMP, code FROM rates", nil},
		{"SELECT CURDATE(), code FROM rates", nil},
		{"SELECT UNIX_TIMESTAMP(), code FROM rates", nil},
		{"SELECT RAND(), code FROM rates", nil},
		{"SELECT UUID(), code FROM rates", nil},
		{"SELECT CONNECTION_ID(), code FROM rates", nil},
		{"SELECT LAST_INSERT_ID(), code FROM rates", nil},
		{"SELECT FOUND_ROWS(), code FROM rates", nil},
		{"SELECT USER(), code FROM rates", nil},
		{"SELECT CURRENT_USER(), code FROM rates", nil},
		{"SELECT VERSION(), code FROM rates", nil},
		{"SELECT SLEEP(1), code FROM rates", nil},
		{"SELECT GET_LOCK('a', 1), code FROM rates", nil},
		{"SELECT NEXTVAL(s), code FROM rates", nil},
		{"SELECT NEXT VALUE FOR s, code FROM rates", nil},
		{"SELECT my_func(code) FROM rates", nil},
		{"SELECT shop.fn(code) FROM rates", nil},
		{"SELECT CAST(rate AS TIME) FROM rates", nil},
		{"SELECT SEC_TO_TIME(id) FROM rates", nil},
		{"SELECT ROW_NUMBER() OVER (ORDER BY id) FROM rates", nil},
		{"WITH x AS (SELECT * FROM rates) SELECT * FROM x", nil},
		{"SELECT DEFAULT(code) FROM rates", nil},
		{"SELECT * FROM rates AS OF TIMESTAMP '2020-01-01 00:00:00'", nil},
		{"SELECT LOAD_FILE('/etc/passwd'), code FROM rates", nil},
	} {
		pr := parser.New()
		stmts, _, err := pr.ParseSQL(tc.sql)
		if err != nil {
			// Unparsable statements are never eligible.
			if tc.tables != nil {
				t.Errorf("%s: %v", tc.sql, err)
			}
			continue
		}
		shape := ShapeOf(stmts[0], "shop")
		switch {
		case tc.tables == nil && shape != nil:
			t.Errorf("%s: eligible (tables %v), want not", tc.sql, shape.Tables)
		case tc.tables != nil && shape == nil:
			t.Errorf("%s: not eligible", tc.sql)
		case tc.tables != nil && !slices.Equal(shape.Tables, tc.tables):
			t.Errorf("%s: tables %v, want %v", tc.sql, shape.Tables, tc.tables)
		}
	}
}
