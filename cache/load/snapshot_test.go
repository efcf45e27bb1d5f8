package load

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
