package e2e

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"tableproxy/internal/testdb"
)

// TestDeferredBegin checks the transactions whose BEGIN the proxy answers
// itself: one that reads only cached tables never reaches the backend, and
// one that does reach it behaves as if BEGIN had gone there first.
func TestDeferredBegin(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 10), (2, 20)")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "kv", 2)
	v0 := waitState(t, admin, "kv", "ready", 2, 1)
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.db, nil))
	ctx := context.Background()
	conn, err := e.open(t, e.app).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	value := func(db interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, q string) int64 {
		t.Helper()
		var v int64
		if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	servedFrom := func() (string, string) {
		t.Helper()
		return lastServedFrom(t, conn)
	}
	read := "SELECT v FROM kv WHERE id = 1"
	value(conn, read) // learn the shape's metadata

	// A read-only transaction: BEGIN, the read and COMMIT are the proxy's.
	exec("BEGIN")
	if from, why := servedFrom(); from != "proxy" || !strings.Contains(why, "not reached the backend") {
		t.Errorf("BEGIN: %s, %q", from, why)
	}
	if v := value(conn, read); v != 10 {
		t.Fatalf("read %d, want 10", v)
	}
	if from, why := servedFrom(); from != "proxy" {
		t.Errorf("read in the transaction served from %s: %s", from, why)
	}
	// The transaction reads one version: a write that bypasses the proxy
	// is not seen until it ends.
	e.backend.Exec(t, "UPDATE `"+e.db+"`.kv SET v = 11 WHERE id = 1")
	waitState(t, admin, "kv", "ready", 2, v0+1)
	if v := value(conn, read); v != 10 {
		t.Errorf("in the transaction, read %d after a later write, want the pinned 10", v)
	}
	exec("COMMIT")
	if from, _ := servedFrom(); from != "proxy" {
		t.Errorf("COMMIT of a read-only transaction went to the %s", from)
	}
	waitSettled(t, admin, "kv", 2)
	if v := value(conn, read); v != 11 {
		t.Errorf("after COMMIT, read %d, want 11", v)
	}

	// Prepared BEGIN, COMMIT and ROLLBACK (as sysbench sends them) are
	// answered alike; a prepared transaction that writes reaches the
	// backend with its BEGIN.
	prep := func(q string) *sql.Stmt {
		t.Helper()
		s, err := conn.PrepareContext(ctx, q)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	pBegin, pCommit, pRollback := prep("BEGIN"), prep("COMMIT"), prep("ROLLBACK")
	run := func(s *sql.Stmt, what string) {
		t.Helper()
		if _, err := s.ExecContext(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run(pBegin, "prepared BEGIN")
	if from, _ := servedFrom(); from != "proxy" {
		t.Errorf("prepared BEGIN answered by the %s", from)
	}
	if v := value(conn, read); v != 11 {
		t.Errorf("read %d in a prepared transaction, want 11", v)
	}
	run(pCommit, "prepared COMMIT")
	if from, _ := servedFrom(); from != "proxy" {
		t.Errorf("prepared COMMIT of a read-only transaction answered by the %s", from)
	}
	run(pBegin, "prepared BEGIN")
	exec("UPDATE kv SET v = 98 WHERE id = 2")
	run(pRollback, "prepared ROLLBACK")
	if v := value(direct, "SELECT v FROM `"+e.db+"`.kv WHERE id = 2"); v != 20 {
		t.Errorf("after a prepared ROLLBACK the backend has v = %d, want 20", v)
	}
	waitSettled(t, admin, "kv", 2)

	// A transaction that reaches the backend: BEGIN is sent first, so the
	// backend sees a transaction, and ROLLBACK undoes its write.
	exec("START TRANSACTION")
	if v := value(conn, "SELECT @@in_transaction"); v != 1 {
		t.Errorf("@@in_transaction = %d in a deferred transaction, want 1", v)
	}
	exec("UPDATE kv SET v = 99 WHERE id = 2")
	exec("ROLLBACK")
	if from, _ := servedFrom(); from != "backend" {
		t.Errorf("ROLLBACK of a transaction that wrote went to the %s", from)
	}
	if v := value(conn, "SELECT @@in_transaction"); v != 0 {
		t.Errorf("@@in_transaction = %d after ROLLBACK, want 0", v)
	}
	if v := value(direct, "SELECT v FROM `"+e.db+"`.kv WHERE id = 2"); v != 20 {
		t.Errorf("after ROLLBACK the backend has v = %d, want 20: BEGIN did not reach it", v)
	}

	// A transaction whose first statement at the backend is a read that
	// changes nothing: BEGIN travels with it, and the transaction's
	// snapshot, taken by that read, holds for the next one.
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.other (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+e.db+"`.other VALUES (1, 1)")
	exec("BEGIN")
	if v := value(conn, "SELECT v FROM other WHERE id = 1"); v != 1 {
		t.Errorf("first read in the transaction: v = %d, want 1", v)
	}
	e.backend.Exec(t, "UPDATE `"+e.db+"`.other SET v = 2 WHERE id = 1")
	if v := value(conn, "SELECT v FROM other WHERE id = 1"); v != 1 {
		t.Errorf("the transaction saw a write made after its first read (v = %d): BEGIN did not reach the backend with it", v)
	}
	exec("COMMIT")
	if v := value(conn, "SELECT v FROM other WHERE id = 1"); v != 2 {
		t.Errorf("after COMMIT, v = %d, want 2", v)
	}

	// BEGIN inside a transaction (an implicit commit) and BEGIN with
	// modifiers go to the backend as they are.
	exec("BEGIN")
	exec("UPDATE kv SET v = 21 WHERE id = 2")
	exec("BEGIN") // commits the update
	exec("ROLLBACK")
	if v := value(direct, "SELECT v FROM `"+e.db+"`.kv WHERE id = 2"); v != 21 {
		t.Errorf("BEGIN inside a transaction did not commit it: v = %d", v)
	}
	// With autocommit off, a read starts a transaction in the backend:
	// reads go there until autocommit is back on.
	waitSettled(t, admin, "kv", 2)
	exec("SET autocommit = 0")
	value(conn, read)
	if from, why := servedFrom(); from != "backend" || !strings.Contains(why, "autocommit is off") {
		t.Errorf("with autocommit off: %s, %q", from, why)
	}
	exec("COMMIT")
	exec("SET autocommit = 1")
	value(conn, read)
	if from, why := servedFrom(); from != "proxy" {
		t.Errorf("with autocommit back on: %s, %q", from, why)
	}

	exec("START TRANSACTION READ ONLY")
	if from, _ := servedFrom(); from != "backend" {
		t.Errorf("START TRANSACTION READ ONLY went to the %s", from)
	}
	exec("COMMIT")
}

// lastServedFrom says where the session's last statement was answered
// ("proxy" or "backend") and why, from EXPLAIN LAST STATEMENT.
func lastServedFrom(t *testing.T, conn *sql.Conn) (from, why string) {
	t.Helper()
	var stmt string
	if err := conn.QueryRowContext(context.Background(), "EXPLAIN LAST STATEMENT").Scan(&stmt, &from, &why); err != nil {
		t.Fatal(err)
	}
	return from, why
}
