package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// TestResultCache: reads of cached tables that the evaluator does not
// answer (functions, joins, grouping) are answered from the result cache
// once the backend has answered them, byte for byte as MariaDB answers,
// in the text and the binary protocol; a write through the proxy or
// around it is seen by the next read; a transaction that wrote a table
// gets no answers from the cache.
func TestResultCache(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.orders (id INT PRIMARY KEY, code VARCHAR(10) COLLATE utf8mb4_unicode_ci, "+
			"cust INT, amount DECIMAL(10,2), placed DATETIME, at TIME)",
		"INSERT INTO `"+e.db+"`.orders VALUES (1, 'eur', 1, 10.50, '2026-01-02 03:04:05', '10:00:00'), "+
			"(2, 'Usd', 2, 7.25, '2026-02-03 04:05:06', '11:30:00'), (3, 'gbp', 1, 99.99, NULL, NULL), "+
			"(4, 'éur', 3, 0.01, '2026-03-04 05:06:07', '-01:00:00')",
		"CREATE TABLE `"+e.db+"`.customers (id INT PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO `"+e.db+"`.customers VALUES (1, 'Ann'), (2, 'Bob'), (3, 'Cy')")
	admin := e.open(t, e.admin)
	for _, tbl := range []string{"orders", "customers"} {
		if _, err := admin.Exec("ALTER TABLE " + tbl + " CACHE"); err != nil {
			t.Fatal(err)
		}
	}
	waitSettled(t, admin, "orders", 4)
	waitSettled(t, admin, "customers", 3)
	app := e.open(t, e.app)
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.db, nil))

	type query struct {
		sql  string
		args []any // with args: a prepared statement (binary protocol)
	}
	queries := []query{
		{sql: "SELECT id, CONCAT(UPPER(code), '-', cust), amount * 2 FROM orders WHERE id <= 3 ORDER BY id"},
		{sql: "SELECT id, CONCAT(UPPER(code), '-', cust), amount * 2 FROM orders WHERE id <= ? ORDER BY id", args: []any{3}},
		{sql: "SELECT o.id, CONCAT(c.name, '/', o.code), o.amount FROM orders o JOIN customers c ON c.id = o.cust ORDER BY o.id"},
		{sql: "SELECT o.id, UPPER(c.name) FROM orders o JOIN customers c ON c.id = o.cust WHERE c.name = ? ORDER BY o.id", args: []any{"Ann"}},
		{sql: "SELECT cust, COUNT(*), SUM(amount), GROUP_CONCAT(code ORDER BY id) FROM orders GROUP BY cust HAVING COUNT(*) > 0 ORDER BY cust"},
		{sql: "SELECT * FROM orders WHERE UPPER(code) = 'EUR'"},
		{sql: "SELECT id, DATE_FORMAT(placed, '%W %M'), LENGTH(code) FROM orders WHERE code LIKE ? ORDER BY id", args: []any{"%u%"}},
	}
	run := func(db *sql.DB, q query) string {
		t.Helper()
		var r *sql.Rows
		var err error
		if q.args != nil {
			stmt, perr := db.Prepare(q.sql)
			if perr != nil {
				t.Fatalf("%s: %v", q.sql, perr)
			}
			defer stmt.Close()
			r, err = stmt.Query(q.args...)
		} else {
			r, err = db.Query(q.sql)
		}
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		return dumpRows(r)
	}
	resultHits := func() int64 {
		var n int64
		if err := admin.QueryRow("SELECT result_hits FROM tableproxy.cached_tables WHERE table_name = 'orders'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// check runs q through the proxy until the result cache answers it
	// (the first execution goes to the backend and is stored, which takes
	// effect within milliseconds), each answer identical to MariaDB's.
	check := func(what string, q query) {
		t.Helper()
		want := run(direct, q)
		waitFor(t, 5*time.Second, what+": "+q.sql+" answered from the result cache", func() (bool, error) {
			before := resultHits()
			if got := run(app, q); got != want {
				t.Fatalf("%s: %s\nproxy:  %s\ndirect: %s", what, q.sql, got, want)
			}
			return resultHits() > before, nil
		})
	}
	for _, q := range queries {
		check("first", q)
	}

	// A write through the proxy: the next read sees it, and later reads
	// are answered from the cache again.
	q := queries[0]
	if _, err := app.Exec("UPDATE orders SET code = 'chf' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if got, want := run(app, q), run(direct, q); got != want {
		t.Fatalf("after a write through the proxy:\nproxy:  %s\ndirect: %s", got, want)
	}
	waitSettled(t, admin, "orders", 4)
	check("after a write through the proxy", q)

	// A write that bypasses the proxy, once the binary log has shown it.
	_, _, before, _ := cachedState(t, admin, "orders")
	e.backend.Exec(t, "UPDATE `"+e.db+"`.orders SET code = 'nok' WHERE id = 2")
	waitFor(t, 10*time.Second, "the bypassing write to invalidate the copy", func() (bool, error) {
		_, _, v, _ := cachedState(t, admin, "orders")
		return v > before, nil
	})
	if got, want := run(app, q), run(direct, q); got != want {
		t.Fatalf("after a write around the proxy:\nproxy:  %s\ndirect: %s", got, want)
	}
	waitSettled(t, admin, "orders", 4)
	check("after a write around the proxy", q)
	for _, q := range queries[1:] {
		check("again", q)
	}

	// A transaction that wrote the table reads it from the backend: its
	// own write shows, and the result cache answers none of its reads.
	bobCount := "SELECT COUNT(*), GROUP_CONCAT(o.id) FROM orders o JOIN customers c ON c.id = o.cust WHERE c.name = 'Bob'"
	gbp := "SELECT CONCAT(UPPER(code), '-', cust) FROM orders WHERE id = 3"
	check("before the transaction", query{sql: bobCount})
	check("before the transaction", query{sql: gbp})
	ctx := context.Background()
	conn, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "UPDATE orders SET cust = 2 WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	hits := resultHits()
	for i := 0; i < 3; i++ {
		var n int
		var ids string
		if err := conn.QueryRowContext(ctx, bobCount).Scan(&n, &ids); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("inside the writing transaction: %d orders of Bob, want 2 (its own write)", n)
		}
		var s string
		if err := conn.QueryRowContext(ctx, gbp).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != "GBP-2" {
			t.Fatalf("inside the writing transaction: %s, want GBP-2", s)
		}
	}
	if got := resultHits(); got != hits {
		t.Errorf("a transaction that wrote the table got %d answers from the result cache", got-hits)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "orders", 4)
	check("after the rollback", queries[2])

	// Reads whose answer depends on more than the tables are never served
	// from the cache. One connection, so that EXPLAIN LAST STATEMENT can
	// say why a read that was served from it was.
	one, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, sqlText := range []string{
		"SELECT id, NOW() FROM orders ORDER BY id",
		"SELECT id, RAND() FROM orders ORDER BY id",
		"SELECT id, CONNECTION_ID() FROM orders ORDER BY id",
		"SELECT id, @@time_zone FROM orders ORDER BY id",
		"SELECT id FROM orders WHERE at > '10:30:00' ORDER BY id",
		"SELECT id FROM orders ORDER BY id FOR UPDATE",
	} {
		for i := 0; i < 3; i++ {
			hits := resultHits()
			r, err := one.QueryContext(ctx, sqlText)
			if err != nil {
				t.Fatalf("%s: %v", sqlText, err)
			}
			dumpRows(r)
			if got := resultHits(); got != hits {
				from, why := lastServedFrom(t, one)
				t.Errorf("%s (run %d) was answered from the result cache: it depends on more than the tables (served from %s: %s)",
					sqlText, i+1, from, why)
			}
		}
	}
	t.Logf("result cache hits: %d", resultHits())
}

// TestResultCacheSeesWrites: with writers and readers racing, a read
// answered from the result cache never shows a value older than a write
// acknowledged through the proxy before the read began.
func TestResultCacheSeesWrites(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 0), (2, 0), (3, 0)")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "kv", 3)

	var acked [4]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := time.Now().Add(3 * time.Second)
	for id := 1; id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := e.open(t, e.app)
			for n := int64(1); time.Now().Before(stop); n++ {
				if _, err := db.Exec("UPDATE kv SET v = ? WHERE id = ?", n, id); err != nil {
					errs <- err
					return
				}
				acked[id].Store(n)
				// Let the cache warm between writes: an intent outlives its
				// write by a few tens of milliseconds, then the table reloads.
				time.Sleep(time.Duration(id) * 120 * time.Millisecond)
			}
		}()
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(prepared bool) {
			defer wg.Done()
			db := e.open(t, e.app)
			for time.Now().Before(stop) {
				for id := 1; id <= 3; id++ {
					floor := acked[id].Load()
					var v int64
					var err error
					// Text: the statement's text is the key; prepared: its parameters.
					if prepared {
						err = db.QueryRow("SELECT CAST(CONCAT(v, '') AS SIGNED) FROM kv WHERE id = ?", id).Scan(&v)
					} else {
						err = db.QueryRow(fmt.Sprintf("SELECT CAST(CONCAT(v, '') AS SIGNED) FROM kv WHERE id = %d", id)).Scan(&v)
					}
					if err != nil {
						errs <- err
						return
					}
					if v < floor {
						errs <- fmt.Errorf("row %d: read %d after write %d was acknowledged", id, v, floor)
						return
					}
				}
			}
		}(r%2 == 0)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var hits, all, passes int64
	if err := admin.QueryRow("SELECT result_hits, hits, pass_throughs FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&hits, &all, &passes); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads answered from the result cache (%d from memory, %d from the backend)", hits, all, passes)
	if hits == 0 {
		t.Error("no read was answered from the result cache: the test did not exercise it")
	}
}

// TestMariaDBExecutableComments: MariaDB runs the text of /*M! ... */
// comments, which the proxy's parser skips; such statements are never
// answered from memory, and one that may write is taken for a write of
// every cached table.
func TestMariaDBExecutableComments(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 0), (2, 0), (3, 0)",
		"CREATE FUNCTION `"+e.db+"`.bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA "+
			"BEGIN UPDATE `"+e.db+"`.kv SET v = v + 1 WHERE id = 1; RETURN 1; END")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "kv", 3)
	app := e.open(t, e.app)
	for i := 0; i < 3; i++ {
		for _, q := range []string{"SELECT COUNT(*) FROM kv WHERE id > ? /*M! AND 0 */", "SELECT COUNT(*) FROM kv WHERE id > 0 /*M! AND 0 */"} {
			var n int
			var err error
			if strings.Contains(q, "?") {
				err = app.QueryRow(q, 0).Scan(&n)
			} else {
				err = app.QueryRow(q).Scan(&n)
			}
			if err != nil || n != 0 {
				t.Fatalf("%s, run %d: %d rows, %v; MariaDB counts 0", q, i+1, n, err)
			}
		}
	}
	read := func() int64 {
		var v int64
		if err := app.QueryRow("SELECT v FROM kv WHERE id = ?", 1).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitSettled(t, admin, "kv", 3)
	read()
	for i := int64(1); i <= 2; i++ {
		var one, two int
		if err := app.QueryRow("SELECT 1 /*M!, bump() */").Scan(&one, &two); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != i {
			t.Fatalf("after a write hidden in an executable comment: read %d, want %d", got, i)
		}
	}
}
