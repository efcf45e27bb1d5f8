package cache

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/testdb"
)

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
