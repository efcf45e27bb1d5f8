package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// cacheEnv is a database with an application user and an admin, and a
// proxy with the cache plugin in front of it.
type cacheEnv struct {
	backend testdb.Backend
	db      string
	app     account
	admin   account
	dataDir string
	yaml    string
	proxy   *proxyProc
	// more are users the proxy accepts beside app (add them, then
	// restart).
	more []account
}

func newCacheEnv(t *testing.T) *cacheEnv { return newCacheEnvOpts(t, "") }

// newCacheEnvOpts is newCacheEnv with more options of the cache plugin
// (YAML flow mapping entries: "a: 1, b: 2").
func newCacheEnvOpts(t *testing.T, options string) *cacheEnv {
	if options != "" {
		options = ", " + options
	}
	e := newCacheEnvUnstarted(t, "plugins:\n  - name: cache\n    options: {max_table_size: 1MB"+options+"}\n")
	e.start(t)
	return e
}

// newCacheEnvUnstarted makes newCacheEnv's database and users (the admin
// may read the binary log), with yaml as the proxy's configuration, and
// starts no proxy: the test starts it as it needs.
func newCacheEnvUnstarted(t *testing.T, yaml string) *cacheEnv {
	b := testdb.Get(t)
	e := &cacheEnv{backend: b, db: b.NewDatabase(t), dataDir: t.TempDir(), yaml: yaml}
	e.app = account{b.NewUser(t, "app-pw", "ALL", e.db), "app-pw"}
	e.admin = account{b.NewUser(t, "admin-pw", "ALL", e.db), "admin-pw"}
	// The admin who caches the first table also reads the binary log.
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", e.admin.name, host))
	}
	return e
}

func (e *cacheEnv) start(t *testing.T) {
	e.proxy = startProxyOpts(t, e.backend.Addr, append([]account{e.app}, e.more...), proxyOpts{yaml: e.yaml, admins: []account{e.admin}, dataDir: e.dataDir})
}

func (e *cacheEnv) open(t *testing.T, a account) *sql.DB {
	return testdb.Open(t, testdb.DSN(e.proxy.addr, a.name, a.password, e.db, nil))
}

// tableStatus is a table's row of tableproxy.cached_tables, the columns
// the tests read.
type tableStatus struct {
	state, staleReason, invalidation string
	rows, version                    int64
}

// cachedStatus reads a table's row of tableproxy.cached_tables.
func cachedStatus(t *testing.T, db *sql.DB, table string) (st tableStatus, found bool) {
	t.Helper()
	err := db.QueryRow("SELECT state, row_count, version, stale_reason, invalidation FROM tableproxy.cached_tables WHERE table_name = '"+table+"'").
		Scan(&st.state, &st.rows, &st.version, &st.staleReason, &st.invalidation)
	if err == sql.ErrNoRows {
		return tableStatus{}, false
	}
	if err != nil {
		t.Fatalf("cached_tables: %v", err)
	}
	return st, true
}

// cachedState reads a table's state, row count and version.
func cachedState(t *testing.T, db *sql.DB, table string) (state string, rows, version int64, found bool) {
	t.Helper()
	st, found := cachedStatus(t, db, table)
	return st.state, st.rows, st.version, found
}

func waitState(t *testing.T, db *sql.DB, table, want string, wantRows, minVersion int64) int64 {
	t.Helper()
	var version int64
	waitFor(t, 20*time.Second, fmt.Sprintf("%s to be %s", table, want), func() (bool, error) {
		st, _ := cachedStatus(t, db, table)
		version = st.version
		return st.state == want && st.rows == wantRows && st.version >= minVersion,
			fmt.Errorf("state %s (%s), rows %d, version %d, invalidation %s", st.state, st.staleReason, st.rows, st.version, st.invalidation)
	})
	return version
}

func wantError(t *testing.T, err error, number uint16, fragment string) {
	t.Helper()
	if got := mysqlErrNumber(err); got != number || !strings.Contains(fmt.Sprint(err), fragment) {
		t.Errorf("got %v, want error %d containing %q", err, number, fragment)
	}
}

func TestCacheAdminSQL(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.rates (id INT PRIMARY KEY, code CHAR(3), rate DECIMAL(12,6))",
		"INSERT INTO `"+e.db+"`.rates VALUES (1, 'EUR', 1.0), (2, 'USD', 1.08), (3, 'GBP', 0.86)",
		"CREATE TABLE `"+e.db+"`.nopk (a INT)",
		"CREATE TABLE `"+e.db+"`.big (id INT PRIMARY KEY, b LONGBLOB)",
		"INSERT INTO `"+e.db+"`.big SELECT seq, REPEAT('x', 100000) FROM mysql.seq_1_to_30",
		"ANALYZE TABLE `"+e.db+"`.big",
		// Its scans return rows in descending key order.
		"CREATE TABLE `"+e.db+"`.desckey (a INT, b INT, PRIMARY KEY (a DESC, b))",
		// A delete or update of a parent row changes its rows, which
		// neither the statement nor the binary log names.
		"CREATE TABLE `"+e.db+"`.parent (id INT PRIMARY KEY)",
		"CREATE TABLE `"+e.db+"`.child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE)")
	app, admin := e.open(t, e.app), e.open(t, e.admin)

	_, err := app.Exec("ALTER TABLE rates CACHE")
	wantError(t, err, 1227, "Access denied")
	_, err = admin.Exec("ALTER TABLE missing CACHE")
	wantError(t, err, 1146, "doesn't exist")
	_, err = admin.Exec("ALTER TABLE nopk CACHE")
	wantError(t, err, 8242, "'table without a primary key' is unsupported on cache tables.")
	_, err = admin.Exec("ALTER TABLE big CACHE")
	wantError(t, err, 8242, "'table too large' is unsupported on cache tables.")
	_, err = admin.Exec("ALTER TABLE desckey CACHE")
	wantError(t, err, 8242, "'table with a descending primary key' is unsupported on cache tables.")
	_, err = admin.Exec("ALTER TABLE child CACHE")
	wantError(t, err, 8242, "'table changed by a foreign key's cascade' is unsupported on cache tables.")
	if _, err := admin.Exec("ALTER TABLE parent CACHE"); err != nil {
		t.Errorf("ALTER TABLE parent CACHE: %v", err) // its own writes are seen
	} else if _, err := admin.Exec("ALTER TABLE parent NOCACHE"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("ALTER TABLE rates CACHE"); err != nil {
		t.Fatalf("ALTER TABLE rates CACHE: %v", err)
	}
	v1 := waitState(t, app, "rates", "ready", 3, 1)

	// (DDL on a cached table runs: TestSchemaChangesOnCachedTables.)

	// A write through the proxy bumps the version; the copy is reloaded.
	if _, err := app.Exec("INSERT INTO rates VALUES (4, 'JPY', 162.5)"); err != nil {
		t.Fatal(err)
	}
	v2 := waitState(t, app, "rates", "ready", 4, v1+1)

	// A transaction that writes keeps the table unservable until it ends.
	tx, err := app.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE rates SET rate = 1.09 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	if state, _, _, _ := cachedState(t, admin, "rates"); state != "stale" {
		t.Errorf("during a writing transaction: state %s, want stale", state)
	}
	if st, _ := cachedStatus(t, admin, "rates"); st.staleReason != "1 write(s) to it through this proxy not ended yet (a transaction's, until it commits or rolls back)" {
		t.Errorf("during a writing transaction: stale_reason %q", st.staleReason)
	}
	time.Sleep(100 * time.Millisecond) // no reload may make it servable meanwhile
	if state, _, _, _ := cachedState(t, admin, "rates"); state != "stale" {
		t.Errorf("during a writing transaction, later: state %s, want stale", state)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	v3 := waitState(t, app, "rates", "ready", 4, v2+1)

	// Which tables are cached survives a restart.
	e.proxy.stop(t)
	e.start(t)
	app, admin = e.open(t, e.app), e.open(t, e.admin)
	waitState(t, app, "rates", "ready", 4, 1)
	_ = v3

	// A write that bypasses the proxy is seen in the binary log and
	// invalidates the copy, which is then reloaded with the write.
	before := waitState(t, app, "rates", "ready", 4, 1)
	start := time.Now()
	e.backend.Exec(t, "DELETE FROM `"+e.db+"`.rates WHERE id = 4")
	waitFor(t, 10*time.Second, "the bypassing write to invalidate the copy", func() (bool, error) {
		_, _, v, _ := cachedState(t, app, "rates")
		return v > before, nil
	})
	t.Logf("a write bypassing the proxy invalidated the cached copy after %v", time.Since(start))
	waitState(t, app, "rates", "ready", 3, before+1)
	waitFor(t, 10*time.Second, "the watcher to follow the binary log", func() (bool, error) {
		var inval string
		err := app.QueryRow("SELECT invalidation FROM tableproxy.cached_tables WHERE table_name = 'rates'").Scan(&inval)
		return err == nil && inval == "binlog", fmt.Errorf("invalidation %q, %v", inval, err)
	})

	if _, err := admin.Exec("ALTER TABLE rates NOCACHE"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, found := cachedState(t, app, "rates"); found {
		t.Error("rates still listed after NOCACHE")
	}
	if _, err := admin.Exec("ALTER TABLE rates ADD COLUMN note VARCHAR(10)"); err != nil {
		t.Errorf("DDL after NOCACHE: %v", err)
	}
}

// TestCachedTableGrowsPastCap: a cached table that grows past the size cap
// stops being cached; the write that made it grow is not refused.
func TestCachedTableGrowsPastCap(t *testing.T) {
	e := newCacheEnv(t) // max_table_size 1MB
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.grow (id INT PRIMARY KEY, b VARCHAR(2000))",
		"INSERT INTO `"+e.db+"`.grow VALUES (1, 'x')")
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE grow CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "grow", "ready", 1, 1)
	if _, err := app.Exec("INSERT INTO grow SELECT seq, REPEAT('y', 2000) FROM seq_2_to_1500"); err != nil {
		t.Fatalf("a write that grows a cached table past the cap was refused: %v", err)
	}
	waitFor(t, 20*time.Second, "the oversized table to stop being cached", func() (bool, error) {
		_, _, _, found := cachedState(t, app, "grow")
		return !found, nil
	})
	var n int
	if err := app.QueryRow("SELECT COUNT(*) FROM grow").Scan(&n); err != nil || n != 1500 {
		t.Fatalf("rows %d, %v", n, err)
	}
	waitFor(t, 5*time.Second, "the proxy to log why it stopped caching the table", func() (bool, error) {
		return strings.Contains(e.proxy.stderr.String(), "grew past the size cap"), nil
	})
}

// TestExplainLastStatement checks that a session can see whether and why
// its last statement was answered from memory.
func TestExplainLastStatement(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.codes (id INT PRIMARY KEY, code VARCHAR(8), n DECIMAL(6,2))",
		"INSERT INTO `"+e.db+"`.codes VALUES (1, 'EUR', 1.5), (2, 'USD', 2.5)")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE codes CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "codes", "ready", 2, 1)
	// One connection, so that "last" is this session's.
	conn, err := e.open(t, e.app).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	explain := func(query string) (stmt, from, why string) {
		t.Helper()
		if err := conn.QueryRowContext(context.Background(), "EXPLAIN LAST STATEMENT").Scan(&stmt, &from, &why); err != nil {
			t.Fatal(err)
		}
		if stmt != query {
			t.Fatalf("EXPLAIN LAST STATEMENT explains %q, want %q", stmt, query)
		}
		return
	}
	run := func(query string) {
		t.Helper()
		rows, err := conn.QueryContext(context.Background(), query)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}

	q := "SELECT code FROM codes WHERE code = 'usd'"
	run(q)
	if _, from, why := explain(q); from != "backend" || !strings.Contains(why, "metadata is learned") {
		t.Errorf("first execution: %s, %q", from, why)
	}
	run(q)
	if _, from, _ := explain(q); from != "proxy" {
		t.Errorf("second execution served from %s, want proxy", from)
	}
	// Asking again explains the same statement: EXPLAIN does not replace it.
	if _, from, _ := explain(q); from != "proxy" {
		t.Errorf("EXPLAIN LAST STATEMENT replaced the last statement")
	}
	q = "SELECT code FROM codes WHERE n > 2"
	run(q)
	if _, from, why := explain(q); from != "backend" || !strings.Contains(why, "WHERE `n`>? is not covered") {
		t.Errorf("uncovered WHERE: %s, %q", from, why)
	}
	q = "SELECT code, COUNT(*) FROM codes GROUP BY code"
	run(q)
	if _, from, why := explain(q); from != "backend" || !strings.Contains(why, "GROUP BY") {
		t.Errorf("GROUP BY: %s, %q", from, why)
	}
	q = "UPDATE codes SET n = n + 1 WHERE id = 1"
	if _, err := conn.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if _, from, why := explain(q); from != "backend" || !strings.Contains(why, "not a SELECT") {
		t.Errorf("UPDATE: %s, %q", from, why)
	}
	// The same through the virtual table, filtered like any table.
	var from string
	if err := conn.QueryRowContext(context.Background(),
		"SELECT served_from FROM tableproxy.last_statement WHERE served_from = 'backend'").Scan(&from); err != nil {
		t.Fatal(err)
	}
}

// TestStringLookupsOnLargeTable checks that lookups by a string column of a
// table too large to scan are answered through the column's index, with
// the backend's answer.
func TestStringLookupsOnLargeTable(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.codes (id INT PRIMARY KEY, code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, n INT)",
		"INSERT INTO `"+e.db+"`.codes SELECT seq, CONCAT(IF(seq % 2, 'c', 'C'), seq % 4000), seq % 7 FROM mysql.seq_1_to_6000")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE codes CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "codes", "ready", 6000, 1)
	app := e.open(t, e.app)
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.db, nil))
	for _, q := range []string{
		"SELECT id, code FROM codes WHERE code = 'c1234'",
		"SELECT id, code FROM codes WHERE code IN ('C17', 'c3999  ', 'none')",
		"SELECT id FROM codes WHERE code BETWEEN 'c100' AND 'C1005' AND n > 2",
		"SELECT COUNT(*) FROM codes WHERE code >= 'c3990'",
	} {
		want := dumpQuery(t, direct, q)
		dumpQuery(t, app, q) // learns the metadata
		before := hitsOf(t, admin, "codes")
		if got := dumpQuery(t, app, q); got != want {
			t.Errorf("%s:\nproxy:  %s\ndirect: %s", q, got, want)
		}
		if hitsOf(t, admin, "codes") == before {
			t.Errorf("%s was not answered from memory", q)
		}
	}
	// An aggregate's column is named after its text, and other literals
	// in the WHERE clause leave the name alone: the shape learned once
	// serves them all.
	for i, q := range []string{
		"SELECT COUNT(*), SUM(n) FROM codes WHERE id BETWEEN 10 AND 500",
		"SELECT COUNT(*), SUM(n) FROM codes WHERE id BETWEEN 20 AND 700",
		"SELECT COUNT(*), SUM(n) FROM codes WHERE id BETWEEN 1 AND 7",
	} {
		want := dumpQuery(t, direct, q)
		before := hitsOf(t, admin, "codes")
		if got := dumpQuery(t, app, q); got != want {
			t.Errorf("%s:\nproxy:  %s\ndirect: %s", q, got, want)
		}
		if i > 0 && hitsOf(t, admin, "codes") == before {
			t.Errorf("%s was not answered from memory", q)
		}
	}
}

func dumpQuery(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	r, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return dumpRows(r)
}
