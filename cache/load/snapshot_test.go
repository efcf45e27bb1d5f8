package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/cache/eval"
	"tableproxy/internal/testdb"
	"tableproxy/lease"
)

// TestSnapshotKeepsItsColumnNames: a snapshot's column definitions stay
// whole after the client library has reused the load's buffers for other
// queries (the result cache and the evaluator match columns by name).
func TestSnapshotKeepsItsColumnNames(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t, "CREATE TABLE `"+db+"`.orders (id INT PRIMARY KEY, code VARCHAR(10), at TIME)",
		"INSERT INTO `"+db+"`.orders VALUES (1, 'eur', '10:00:00')")
	conn := connect(t, b, db)
	s, err := Snapshot(context.Background(), conn, lease.TableID{Schema: db, Table: "orders"}, 1, 0, eval.NewCollations())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"id", "code", "at"}
	for i := 0; i < 50; i++ {
		r, err := conn.Execute("SELECT 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz' AS xxxxxxxxxxxxxxxxxxxxxxxx, " +
			"'yyyyyyyyyyyyyyyyyyyy' AS wwwwwwwwwwwwwwwwwwwwwwwwwwwwww, 3 AS vvvvvvvvvvvvvvvvvvvvvvvvv")
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if len(s.Fields) != len(want) {
		t.Fatalf("%d fields, want %d", len(s.Fields), len(want))
	}
	for i, f := range s.Fields {
		if string(f.Name) != want[i] || string(f.OrgName) != want[i] || string(f.OrgTable) != "orders" || string(f.Schema) != db {
			t.Errorf("field %d after later queries: name %q, org_name %q, org_table %q, schema %q; want %q of %s.orders",
				i, f.Name, f.OrgName, f.OrgTable, f.Schema, want[i], db)
		}
	}
}

// TestSnapshotHoldsTheBackendsBytes: a copy's rows are the backend's own
// text-protocol rows, byte for byte, and its FLOAT and DOUBLE columns'
// exact values are the binary protocol's, for values whose text a number
// would not print back (ZEROFILL, a FLOAT's rounding, 1e20), NULLs, and
// strings long enough to take two- and three-byte lengths. Rows follow one
// another with shorter values, so a copy that kept pointing into the
// client library's buffers would show the next rows' bytes.
func TestSnapshotHoldsTheBackendsBytes(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t, "CREATE TABLE `"+db+"`.t (id INT PRIMARY KEY, z INT(6) ZEROFILL, u BIGINT UNSIGNED, f FLOAT, d DOUBLE, "+
		"m DECIMAL(10,3), s VARCHAR(20), blob_ MEDIUMBLOB, at DATETIME(3), y YEAR)",
		"INSERT INTO `"+db+"`.t VALUES "+
			"(1, 42, 18446744073709551615, 0.1, 1e20, -12.5, 'abcdefghijklmnopqrst', REPEAT('x', 70000), '2026-12-06 07:00:00.125', 2026), "+
			"(2, NULL, 0, 3.14159, -2.5e-300, 0, 'xy', CONCAT(0xfb, REPEAT(0x00, 300)), NULL, NULL), "+
			"(3, 7, 1, NULL, NULL, NULL, '', '', '1000-01-01 00:00:00', 1901), "+
			"(4, 0, 2, 1e-7, 0.1, 99.999, NULL, NULL, '9999-12-31 23:59:59.999', 2155)")
	conn := connect(t, b, db)
	s, err := Snapshot(context.Background(), conn, lease.TableID{Schema: db, Table: "t"}, 1, 0, eval.NewCollations())
	if err != nil {
		t.Fatal(err)
	}

	want, err := conn.Execute("SELECT * FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if len(s.Rows) != len(want.RowDatas) {
		t.Fatalf("%d rows, want %d", len(s.Rows), len(want.RowDatas))
	}
	for i, row := range want.RowDatas {
		if !bytes.Equal(s.Rows[i], row) {
			t.Errorf("row %d: %d bytes %.60q..., want %d bytes %.60q...", i, len(s.Rows[i]), s.Rows[i], len(row), row)
		}
	}
	if len(s.Fields) != len(want.Fields) {
		t.Fatalf("%d fields, want %d", len(s.Fields), len(want.Fields))
	}
	for i, f := range want.Fields {
		if !bytes.Equal(s.Fields[i].Dump(), f.Dump()) || s.Fields[i].Type != f.Type {
			t.Errorf("field %d: %+v, want %+v", i, s.Fields[i], f)
		}
	}

	stmt, err := conn.Prepare("SELECT * FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	bin, err := stmt.Execute()
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for c, f := range want.Fields {
		isFloat := f.Type == mysql.MYSQL_TYPE_FLOAT || f.Type == mysql.MYSQL_TYPE_DOUBLE
		if !isFloat {
			if s.Floats[c] != nil {
				t.Errorf("column %s: float values kept for a column of type %d", f.Name, f.Type)
			}
			continue
		}
		if len(s.Floats[c]) != len(bin.Values) {
			t.Fatalf("column %s: %d float values, want %d", f.Name, len(s.Floats[c]), len(bin.Values))
		}
		for i, row := range bin.Values {
			var bits uint64
			if row[c].Type == mysql.FieldValueTypeFloat {
				bits = math.Float64bits(row[c].AsFloat64())
			}
			if s.Floats[c][i] != bits {
				t.Errorf("column %s, row %d: %v, want %v", f.Name, i, math.Float64frombits(s.Floats[c][i]), math.Float64frombits(bits))
			}
		}
	}
}

// connect opens a connection to db as the backend's admin, closed after
// the test.
func connect(t *testing.T, b testdb.Backend, db string) *client.Conn {
	t.Helper()
	conn, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// sbtest makes a table of sysbench's shape with n rows in db.
func sbtest(t *testing.T, b testdb.Backend, db string, n int) lease.TableID {
	t.Helper()
	b.Exec(t, "CREATE TABLE `"+db+"`.sbtest (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k (k))",
		fmt.Sprintf("INSERT INTO `%s`.sbtest SELECT seq, seq %% 1000, CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2)), "+
			"CONCAT(MD5(-seq), '-pad') FROM `%s`.seq_1_to_%d", db, db, n))
	return lease.TableID{Schema: db, Table: "sbtest"}
}

// allocated is what f allocated on the heap, in bytes (every goroutine's:
// the package's tests do not run in parallel).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSnapshotAllocatesAboutItsSize: a load reads the table as a stream
// into its copy, so what it allocates on the way, and what the process's
// memory grows to, is a small multiple of the copy's size, not the whole
// result set held twice (raw and parsed) before the copy is built.
func TestSnapshotAllocatesAboutItsSize(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	id := sbtest(t, b, db, 20000)
	conn := connect(t, b, db)
	var s *eval.Snapshot
	var err error
	n := allocated(func() {
		s, err = Snapshot(context.Background(), conn, id, 1, 0, eval.NewCollations())
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 20000 {
		t.Fatalf("%d rows, want 20000", len(s.Rows))
	}
	if n > uint64(s.Bytes)*2 {
		t.Errorf("the load of a copy of %d bytes allocated %d bytes (%.1fx), want at most 2x", s.Bytes, n, float64(n)/float64(s.Bytes))
	}
	t.Logf("a copy of %d bytes; the load allocated %d bytes (%.2fx)", s.Bytes, n, float64(n)/float64(s.Bytes))
}

// TestSnapshotTooLargeStopsReading: a load stops as soon as its copy
// passes the cap, reads no more of the table into memory, and closes its
// connection (the rest of the result is unread on it), which the backend
// sees end.
func TestSnapshotTooLargeStopsReading(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	id := sbtest(t, b, db, 20000)
	conn := connect(t, b, db)
	const limit = 200 << 10
	var err error
	n := allocated(func() {
		_, err = Snapshot(context.Background(), conn, id, 1, limit, eval.NewCollations())
	})
	var tooLarge *ErrTooLarge
	if !errors.As(err, &tooLarge) {
		t.Fatalf("a load over the cap: %v, want ErrTooLarge", err)
	}
	// The loader that read the whole result first allocated 29 MB here;
	// a streaming one about 0.5 MB, and 1 MB under the race detector,
	// whose instrumentation allocates too.
	if n > 16*limit {
		t.Errorf("a load stopped at a cap of %d bytes allocated %d bytes", limit, n)
	}
	if _, err := conn.Execute("SELECT 1"); err == nil {
		t.Error("the connection of a load stopped mid-table still answers")
	}
	root := b.Root(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left int
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", conn.GetConnectionID()).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backend still runs the connection of a load stopped mid-table")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
