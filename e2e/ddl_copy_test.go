package e2e

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// ddlTypesTable has a column of most types a table can hold, each filled
// with values that are easy to damage in a round trip through text: FLOATs
// and DOUBLEs of every magnitude, fractional seconds, bytes 0x00 and 0xff,
// latin1 and 4-byte UTF-8, trailing spaces, BIT, ENUM, SET, JSON, POINT.
const ddlTypesTable = `(id BIGINT UNSIGNED NOT NULL PRIMARY KEY, f FLOAT, d DOUBLE, fx FLOAT(7,3), dec1 DECIMAL(24,6),
	dt DATETIME(6), ts TIMESTAMP(3) NULL DEFAULT NULL, tm TIME(2), y YEAR, dte DATE,
	l VARCHAR(40) CHARACTER SET latin1, u VARCHAR(40) CHARACTER SET utf8mb4, ch CHAR(8), bn VARBINARY(16), bl BLOB, tx TEXT,
	e ENUM('a', 'b', '€'), st SET('x', 'y', 'z'), b BIT(10), j JSON, g POINT NULL, gen BIGINT AS (id * 2) VIRTUAL,
	k INT NOT NULL DEFAULT 0) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

const ddlTypesColumns = "id, f, d, fx, dec1, dt, ts, tm, y, dte, l, u, ch, bn, bl, tx, e, st, b, j, g, k"

func ddlTypesRows(db string, rows int) string {
	return fmt.Sprintf("INSERT INTO `%s`.t (%s) SELECT seq, (RAND(seq) - 0.5) * POW(10, seq %% 60 - 30), "+
		"(RAND(seq + 7) - 0.5) * POW(10, seq %% 600 - 300), RAND(seq + 1) * 1000, ROUND((RAND(seq + 2) - 0.5) * 1e15, 6), "+
		"'2020-01-01 00:00:00' + INTERVAL seq * 7919 SECOND + INTERVAL seq MICROSECOND, IF(seq %% 5 = 0, NULL, FROM_UNIXTIME(1e9 + seq * 3.001)), "+
		"SEC_TO_TIME(seq %% 80000 - 40000 + 0.25), 1901 + seq %% 255, '1000-01-01' + INTERVAL seq DAY, "+
		"CONVERT(CONCAT('Zürich-', seq) USING latin1), CONCAT('😀 ', seq, ' ü'), CONCAT(seq %% 7, IF(seq %% 3 = 0, '  ', '')), "+
		"UNHEX(CONCAT('00FF', HEX(seq), '00')), IF(seq %% 4 = 0, NULL, RANDOM_BYTES(seq %% 40)), REPEAT('t', seq %% 300), "+
		"ELT(1 + seq %% 3, 'a', 'b', '€'), MAKE_SET(seq %% 8, 'x', 'y', 'z'), seq %% 1024, "+
		"JSON_OBJECT('n', seq, 's', 'é\"\\\\', 'f', seq / 7), IF(seq %% 3 = 0, NULL, POINT(seq / 3, -seq)), seq %% 100 "+
		"FROM (SELECT CAST(seq AS SIGNED) AS seq FROM mysql.seq_1_to_%d) s", db, ddlTypesColumns, rows)
}

// sameRows counts the rows of t and ref that differ in any column,
// compared by value with NULL-safe equality (floats exactly).
func sameRows(t *testing.T, db *sql.DB) (onlyT, onlyRef, differ int) {
	t.Helper()
	var conds []string
	for _, c := range strings.Split(ddlTypesColumns, ", ") {
		switch c {
		case "g":
			conds = append(conds, "ST_AsBinary(t.g) <=> ST_AsBinary(ref.g)")
		case "l", "u", "ch", "tx", "j", "e", "st":
			conds = append(conds, fmt.Sprintf("BINARY t.%s <=> BINARY ref.%s", c, c))
		default:
			conds = append(conds, fmt.Sprintf("t.%s <=> ref.%s", c, c))
		}
	}
	q := func(s string) int {
		var n int
		if err := db.QueryRow(s).Scan(&n); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return n
	}
	onlyT = q("SELECT COUNT(*) FROM t LEFT JOIN ref USING (id) WHERE ref.id IS NULL")
	onlyRef = q("SELECT COUNT(*) FROM ref LEFT JOIN t USING (id) WHERE t.id IS NULL")
	differ = q("SELECT COUNT(*) FROM t JOIN ref USING (id) WHERE NOT (" + strings.Join(conds, " AND ") + ")")
	return
}

// TestDDLCopyMethods copies a table of many types with each copy method
// while a writer changes it; afterwards every column of every row equals a
// reference table's exactly.
func TestDDLCopyMethods(t *testing.T) {
	for _, method := range []string{"insert_select", "read_ahead"} {
		t.Run(method, func(t *testing.T) {
			e := newDDLEnv(t)
			const rows = 6000
			e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTypesTable, "CREATE TABLE `"+e.db+"`.ref "+ddlTypesTable,
				ddlTypesRows(e.db, rows), "INSERT INTO `"+e.db+"`.ref ("+ddlTypesColumns+") SELECT "+ddlTypesColumns+" FROM `"+e.db+"`.t")
			direct := e.direct(t)
			conn := e.session(t, "SET tableproxy_ddl_copy_method = "+method, "SET tableproxy_ddl_batch_size = 500")
			m := startMirrored([]*sql.DB{direct}, direct, func(_, i int) string {
				id := (i*131)%rows + 1
				switch i % 3 {
				case 0:
					return fmt.Sprintf("UPDATE %%s SET f = f * 3, d = -d, u = CONCAT(u, '·'), bn = UNHEX('00'), k = k + 1 WHERE id = %d", id)
				case 1:
					return fmt.Sprintf("DELETE FROM %%s WHERE id = %d", id)
				}
				return fmt.Sprintf("INSERT INTO %%s (id, f, d, u, k) VALUES (%d, 1.1, 2.2e-300, 'ny', 3)", rows+i)
			})
			_, err := conn.ExecContext(t.Context(), "ALTER TABLE t ADD INDEX ik (k), ADD INDEX iu (u(10), bn)")
			time.Sleep(100 * time.Millisecond)
			if err := m.stop(); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(e.proxy.stderr.String(), `msg="ddl: copying" job=1 table=`+e.db+".t method="+method) {
				t.Errorf("the job did not copy with %s", method)
			}
			if a, b, c := sameRows(t, direct); a+b+c > 0 {
				t.Errorf("after the job: %d rows only in t, %d only in ref, %d differ", a, b, c)
			}
			if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `iu` (`u`(10),`bn`)") {
				t.Errorf("definition:\n%s", ddl)
			}
		})
	}
}
