package cache

import (
	"context"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

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
	conn, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := loadSnapshot(context.Background(), conn, lease.TableID{Schema: db, Table: "orders"}, 1, 0, eval.NewCollations())
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

// TestRowsQuery checks that the statement which settles FOUND_ROWS() and
// ROW_COUNT() returns (or counts) exactly n rows on the backend.
func TestRowsQuery(t *testing.T) {
	b := testdb.Get(t)
	conn, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, n := range []uint64{0, 1, 7, 1000, 1001, 54321, 100000, 100001, 2500000} {
		r, err := conn.Execute(rowsQuery(n))
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		r.Close()
		r, err = conn.Execute("SELECT FOUND_ROWS(), ROW_COUNT(), @@warning_count")
		if err != nil {
			t.Fatal(err)
		}
		found, _ := r.GetInt(0, 0)
		count, _ := r.GetInt(0, 1)
		warnings, _ := r.GetInt(0, 2)
		if found != int64(n) || count != -1 || warnings != 0 {
			t.Errorf("%d rows: FOUND_ROWS() %d, ROW_COUNT() %d, %d warnings", n, found, count, warnings)
		}
	}
}
