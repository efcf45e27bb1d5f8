package cache

import (
	"context"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

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
	s, err := loadSnapshot(context.Background(), conn, lease.TableID{Schema: db, Table: "orders"}, 1, 0, newCollations())
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

// TestKeySearches checks the primary-key searches against a linear scan,
// over negative, zero and positive keys with gaps, for every probe between
// and beyond them.
func TestKeySearches(t *testing.T) {
	var s Snapshot
	for _, k := range []int64{-9, -4, -1, 0, 1, 2, 5, 6, 30, 31, 1000} {
		s.pkNums = append(s.pkNums, numOf(k))
	}
	for _, n := range []int{0, 1, 2, len(s.pkNums)} {
		sub := Snapshot{pkNums: s.pkNums[:n]}
		for k := int64(-12); k <= 1002; k++ {
			v := numOf(k)
			wantLo, wantHi := 0, 0
			for _, p := range sub.pkNums {
				if p.cmp(v) < 0 {
					wantLo++
				}
				if p.cmp(v) <= 0 {
					wantHi++
				}
			}
			if lo := sub.lowerBound(v); lo != wantLo {
				t.Fatalf("%d keys: lowerBound(%d) = %d, want %d", n, k, lo, wantLo)
			}
			if hi := sub.upperBound(v); hi != wantHi {
				t.Fatalf("%d keys: upperBound(%d) = %d, want %d", n, k, hi, wantHi)
			}
			if lo, hi := sub.equalRange(v); lo != wantLo || hi != wantHi {
				t.Fatalf("%d keys: equalRange(%d) = [%d, %d), want [%d, %d)", n, k, lo, hi, wantLo, wantHi)
			}
		}
	}
}

func numOf(k int64) num {
	if k < 0 {
		return num{neg: true, mag: uint64(-k)}
	}
	return num{mag: uint64(k)}
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
