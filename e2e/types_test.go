package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"testing"
)

// typeCol is a column of the all-types table, with the values of its
// "low" and "high" rows.
type typeCol struct {
	name, ddl string
	lo, hi    any
}

func typeCols() []typeCol {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	return []typeCol{
		{"ti", "TINYINT", int64(math.MinInt8), int64(math.MaxInt8)},
		{"ti_u", "TINYINT UNSIGNED", int64(0), int64(math.MaxUint8)},
		{"si", "SMALLINT", int64(math.MinInt16), int64(math.MaxInt16)},
		{"si_u", "SMALLINT UNSIGNED", int64(0), int64(math.MaxUint16)},
		{"mi", "MEDIUMINT", int64(-1 << 23), int64(1<<23 - 1)},
		{"mi_u", "MEDIUMINT UNSIGNED", int64(0), int64(1<<24 - 1)},
		{"i", "INT", int64(math.MinInt32), int64(math.MaxInt32)},
		{"i_u", "INT UNSIGNED", int64(0), int64(math.MaxUint32)},
		{"bi", "BIGINT", int64(math.MinInt64), int64(math.MaxInt64)},
		{"bi_u", "BIGINT UNSIGNED", uint64(0), uint64(math.MaxUint64)},
		{"f", "FLOAT", -3.25e38, 1.5e-38},
		{"d", "DOUBLE", -math.MaxFloat64, 2.2250738585072014e-308},
		{"dcm", "DECIMAL(30,10)", "-99999999999999999999.9999999999", "99999999999999999999.9999999999"},
		{"bit1", "BIT(1)", []byte{0}, []byte{1}},
		{"bit64", "BIT(64)", uint64(0), uint64(math.MaxUint64)},
		{"dt", "DATE", "1000-01-01", "9999-12-31"},
		{"tm", "TIME(6)", "-838:59:59.000000", "838:59:59.000000"},
		{"tm_neg", "TIME(6)", "-00:00:01.500000", "00:00:00.000001"},
		{"dtm", "DATETIME(6)", "1000-01-01 00:00:00.000000", "9999-12-31 23:59:59.999999"},
		{"ts", "TIMESTAMP(6) NULL DEFAULT NULL", "1970-01-01 00:00:01.000000", "2038-01-19 03:14:07.999999"},
		{"y", "YEAR", int64(1901), int64(2155)},
		{"c", "CHAR(10)", "", "ÿ€😀abcdefg"},
		{"vc", "VARCHAR(255)", "", strings.Repeat("é", 255)},
		{"bin", "BINARY(8)", []byte{0}, []byte{0xff, 0, '\'', '\\', 0, '"', 0x1a, 0xfe}},
		{"vbin", "VARBINARY(64)", []byte{}, seq(64)},
		{"tb", "TINYBLOB", []byte{}, seq(255)},
		{"mb", "MEDIUMBLOB", []byte{}, pattern(70000, 1)},
		{"lb", "LONGBLOB", []byte{}, pattern(1000, 2)},
		{"tt", "TINYTEXT", "", strings.Repeat("😀", 63)},
		{"mt", "MEDIUMTEXT", "", strings.Repeat("текст ✓ ", 5000)},
		{"lt", "LONGTEXT", "", "line 1\nline 2\ttab\\backslash'quote\"dq\x00nul"},
		{"e", "ENUM('a','b','c')", "a", "c"},
		{"s", "SET('x','y','z')", "", "x,y,z"},
		{"j", "JSON", "{}", `{"a": [1, 2.5, "x", null, true], "emoji": "😀", "nested": {"k": -1e300}}`},
	}
}

// bigBlobSize makes row 4 larger than one 16 MB protocol packet in both
// directions.
const bigBlobSize = 20 << 20

// TestColumnTypes round-trips a row of lows, a row of highs, a row of NULLs
// and a row with a 20 MB LONGBLOB through go-sql-driver, in three modes,
// and requires the proxy's answers to equal the backend's value by value
// and column by column. Each endpoint writes its own copy of the table, and
// each copy is read through both endpoints, so both the write path and the
// read path are compared.
func TestColumnTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	big := pattern(bigBlobSize, 3)
	modes := []struct {
		name   string
		params map[string]string
		// longData says whether the driver must use COM_STMT_SEND_LONG_DATA
		// (it does for a string or []byte argument of at least
		// maxAllowedPacket/(params+1) bytes, minimum 64).
		longData bool
	}{
		// Arguments interpolated into COM_QUERY text; results in the text
		// protocol. The 20 MB UPDATE is a single 21 MB COM_QUERY.
		{"text", map[string]string{"interpolateParams": "true"}, false},
		// COM_STMT_PREPARE/EXECUTE, binary results, dates as time.Time.
		// The 20 MB argument is below 64MB/3, so it travels inline in one
		// COM_STMT_EXECUTE of more than 16 MB.
		{"prepared", map[string]string{"parseTime": "true"}, false},
		// A tiny packet limit: every argument of 64+ bytes goes by
		// COM_STMT_SEND_LONG_DATA, the big one in ~5000 chunks.
		{"longdata", map[string]string{"maxAllowedPacket": "4096"}, true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			m.params["time_zone"] = "'+00:00'" // TIMESTAMP values independent of the host
			eps := e.endpoints()
			dbs := make([]*sql.DB, len(eps))
			tables := make([]string, len(eps))
			longData := make([]int, len(eps))
			for i, ep := range eps {
				tables[i] = fmt.Sprintf("types_%s_%s", m.name, ep.name)
				e.exec(t, createTypesTable(tables[i]))
				dbs[i] = e.open(t, ep, m.params)
				longData[i] = writeTypeRows(t, dbs[i], tables[i], big)
			}
			if longData[0] != longData[1] {
				t.Errorf("backend counted %d COM_STMT_SEND_LONG_DATA through the proxy, %d direct", longData[1], longData[0])
			}
			if got := longData[0] > 0; got != m.longData {
				t.Errorf("direct: %d COM_STMT_SEND_LONG_DATA; the mode does not test what it claims", longData[0])
			}
			// A query with an argument is prepared unless interpolated.
			var ref []resultSet
			for w := range eps {
				for r := range eps {
					q := "SELECT * FROM " + tables[w] + " WHERE id >= ? ORDER BY id"
					got := query(t, dbs[r], q, 0)
					if ref == nil {
						ref = got
						checkTypeRows(t, ref, big)
						continue
					}
					if d := diffSets(ref, got); d != "" {
						t.Errorf("table written %s, read %s, differs from written and read directly: %s", eps[w].name, eps[r].name, d)
					}
				}
			}
		})
	}
}

func createTypesTable(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY", name)
	for _, c := range typeCols() {
		fmt.Fprintf(&b, ", %s %s", c.name, c.ddl)
	}
	b.WriteString(") DEFAULT CHARSET=utf8mb4")
	return b.String()
}

// writeTypeRows inserts rows 1 (lows), 2 (highs), 3 (NULLs) and 4 (lows
// with big in lb) on one connection, and returns how many
// COM_STMT_SEND_LONG_DATA commands the backend counted for it.
func writeTypeRows(t *testing.T, db *sql.DB, table string, big []byte) int {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cols := typeCols()
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		names[i], marks[i] = c.name, "?"
	}
	ins := fmt.Sprintf("INSERT INTO %s (id, %s) VALUES (?, %s)", table, strings.Join(names, ", "), strings.Join(marks, ", "))
	for id := 1; id <= 4; id++ {
		args := []any{id}
		for _, c := range cols {
			switch id {
			case 1, 4:
				args = append(args, c.lo)
			case 2:
				args = append(args, c.hi)
			case 3:
				args = append(args, nil)
			}
		}
		res, err := conn.ExecContext(ctx, ins, args...)
		if err != nil {
			t.Fatalf("insert row %d: %v", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("insert row %d: %d rows affected", id, n)
		}
	}
	res, err := conn.ExecContext(ctx, "UPDATE "+table+" SET lb = ? WHERE id = ?", big, 4)
	if err != nil {
		t.Fatalf("update row 4 with %d bytes: %v", len(big), err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("update row 4: %d rows affected", n)
	}
	var name string
	var n int
	if err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_send_long_data'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkTypeRows sanity-checks the reference result, so that both sides
// being equally wrong (say, empty) cannot pass.
func checkTypeRows(t *testing.T, sets []resultSet, big []byte) {
	t.Helper()
	if len(sets) != 1 || len(sets[0].rows) != 4 || len(sets[0].cols) != len(typeCols())+1 {
		t.Fatalf("reference result: %s, want 1 set of 4 rows and %d columns", summarize(sets), len(typeCols())+1)
	}
	rows := sets[0].rows
	for c := 1; c < len(rows[2]); c++ {
		if rows[2][c] != nil {
			t.Errorf("row 3 column %s: %s, want NULL", sets[0].cols[c], describeValue(rows[2][c]))
		}
	}
	lb := -1
	for i, c := range typeCols() {
		if c.name == "lb" {
			lb = i + 1
		}
	}
	if got, _ := rows[3][lb].([]byte); !bytes.Equal(got, big) {
		t.Errorf("row 4 lb: %s, want the %d bytes written", describeValue(rows[3][lb]), len(big))
	}
}
