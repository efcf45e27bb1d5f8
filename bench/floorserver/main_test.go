package main

import (
	"database/sql"
	"net"
	"reflect"
	"testing"

	"tableproxy/internal/testdb"
)

func TestShape(t *testing.T) {
	for _, tc := range [][2]string{
		{"SELECT c FROM sbtest1 WHERE id=4321", "SELECT c FROM sbtest1 WHERE id=?"},
		{"SELECT c FROM sbtest12 WHERE id BETWEEN 10 AND 109 ORDER BY c", "SELECT c FROM sbtest12 WHERE id BETWEEN ? AND ? ORDER BY c"},
		{"SELECT id FROM t WHERE k IN (1, 22, 333)", "SELECT id FROM t WHERE k IN (?, ?, ?)"},
		{`UPDATE t SET c='it''s \' 7' WHERE id=2`, "UPDATE t SET c=? WHERE id=?"},
		{`SELECT "a""b", 'x', 1.5`, "SELECT ?, ?, ?.?"},
		{"BEGIN", "BEGIN"},
		{"SELECT 'unterminated", "SELECT ?"},
	} {
		if got := string(shape(nil, []byte(tc[0]))); got != tc[1] {
			t.Errorf("shape(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}

func TestTxControl(t *testing.T) {
	for q, want := range map[string]bool{
		"BEGIN": true, " begin": true, "START TRANSACTION READ ONLY": true, "COMMIT": true,
		"rollback;": true, "BEGINNING": false, "SELECT 1": false, "COMMITTED": false, "": false,
	} {
		if got := txControl([]byte(q)); got != want {
			t.Errorf("txControl(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestShapeDoesNotAllocate(t *testing.T) {
	q := []byte("SELECT c FROM sbtest1 WHERE id=4321")
	buf := make([]byte, 0, 64)
	m := map[string][]byte{string(shape(nil, q)): nil}
	allocs := testing.AllocsPerRun(100, func() {
		buf = shape(buf[:0], q)
		if _, ok := m[string(buf)]; !ok {
			t.Fatal("shape not found")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup, want 0", allocs)
	}
}

// TestReplays puts the floor server in front of the test backend and checks
// that text and prepared queries answer with the backend's columns, the
// second time with the first answer's rows.
func TestReplays(t *testing.T) {
	b := testdb.Get(t)
	name := b.NewDatabase(t)
	b.Exec(t, "CREATE TABLE `"+name+"`.t (id INT PRIMARY KEY, c VARCHAR(20), k INT)",
		"INSERT INTO `"+name+"`.t VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', 30)")

	s, err := newServer(b.Addr, b.RootUser, b.RootPassword, name)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.serve(ln); close(done) }()
	t.Cleanup(func() { ln.Close(); <-done })

	// Any user and password log in.
	db := testdb.Open(t, testdb.DSN(ln.Addr().String(), "anyone", "anything", name, nil))
	db.SetMaxOpenConns(2)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}

	check := func(what string, rows *sql.Rows, err error, wantCols []string, want [][]any) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil || !reflect.DeepEqual(cols, wantCols) {
			t.Fatalf("%s: columns %q (%v), want %q", what, cols, err, wantCols)
		}
		var got [][]any
		for rows.Next() {
			var id, k int64
			var c string
			if err := rows.Scan(&id, &c, &k); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got = append(got, []any{id, c, k})
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: rows %v, want %v", what, got, want)
		}
	}
	cols := []string{"id", "c", "k"}
	first := [][]any{{int64(1), "one", int64(10)}}
	firstTwo := [][]any{{int64(1), "one", int64(10)}, {int64(2), "two", int64(20)}}

	// Text protocol: the second query has another literal and the same shape,
	// so it is answered with the first one's row.
	rows, err := db.Query("SELECT id, c, k FROM t WHERE id = 1")
	check("text, first", rows, err, cols, first)
	rows, err = db.Query("SELECT id, c, k FROM t WHERE id = 3")
	check("text, replayed", rows, err, cols, first)

	// Prepared statements, binary rows: prepared, executed and closed twice.
	for _, what := range []string{"prepared, first", "prepared, replayed"} {
		hi := 2
		if what != "prepared, first" {
			hi = 3
		}
		rows, err = db.Query("SELECT id, c, k FROM t WHERE id BETWEEN ? AND ? ORDER BY id", 1, hi)
		check(what, rows, err, cols, firstTwo)
	}
	stmt, err := db.Prepare("SELECT id, c, k FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	for range 3 {
		rows, err = stmt.Query(1)
		check("prepared once, executed", rows, err, cols, first)
	}

	// Transactions and writes answer as the first time.
	for range 2 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if res, err := tx.Exec("UPDATE t SET k = k + 1 WHERE id = ?", 2); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("UPDATE affected %d rows, want 1", n)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var k int
	if err := b.Root(t).QueryRow("SELECT k FROM `" + name + "`.t WHERE id = 2").Scan(&k); err != nil || k != 21 {
		t.Fatalf("the backend has k = %d (%v), want 21: the UPDATE was forwarded once", k, err)
	}

	// An INSERT of an existing id answers as a row inserted.
	for _, tc := range []struct {
		q    string
		args []any
	}{{"INSERT INTO t VALUES (1, 'dup', 0)", nil}, {"INSERT INTO t VALUES (?, 'dup', 0)", []any{1}}} {
		q := tc.q
		for range 2 {
			if res, err := db.Exec(q, tc.args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			} else if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("%s affected %d rows, want 1", q, n)
			}
		}
	}

	// A backend error is passed on, not recorded.
	for range 2 {
		if _, err := db.Query("SELECT nosuch FROM t WHERE id = 1"); err == nil {
			t.Fatal("a query of an unknown column succeeded")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queries["SELECT nosuch FROM t WHERE id = ?"]; ok {
		t.Fatal("an error answer was recorded")
	}
}
