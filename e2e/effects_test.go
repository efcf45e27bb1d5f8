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

// runRequest sends one request (one COM_QUERY, perhaps of several
// statements) on conn and reads every result it returns.
func runRequest(ctx context.Context, conn *sql.Conn, q string) error {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// TestUnusualWritesAreSeen: each form of request that once wrote a cached
// table without the proxy noticing (a write behind a read in one request,
// SET STATEMENT, a compound statement, an executable comment the backend
// skips, dynamic SQL) is seen by the very next read through another
// session, in every trial, with the table answered from memory in between.
func TestUnusualWritesAreSeen(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 0), (2, 0)")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "kv", "ready", 2, 1)
	writerDB := testdb.Open(t, testdb.DSN(e.proxy.addr, e.app.name, e.app.password, e.db, map[string]string{"multiStatements": "true"}))
	ctx := context.Background()
	writer, err := writerDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	reader := e.open(t, e.app)
	read := func() int64 {
		var v int64
		if err := reader.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	const w = "UPDATE kv SET v = %d WHERE id = 1"
	forms := []string{
		"SELECT 1; " + w,
		"USE `" + e.db + "`; " + w,
		"SET @a = 1; " + w,
		"SHOW TABLES; " + w,
		"COMMIT; " + w,
		"SELECT ';'; " + w,
		"SET STATEMENT max_statement_time=0 FOR " + w,
		"BEGIN NOT ATOMIC " + w + "; END",
		"BEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; WHILE n < 1 DO SET n = n + 1; IF n = 1 THEN " + w + "; END IF; END WHILE; END",
		"/*!99999 SELECT 1, */ " + w,
		"/*M!100100 " + w + " */",
		"EXECUTE IMMEDIATE '" + w + "'",
		"PREPARE s FROM 'UPDATE kv SET v = ? WHERE id = 1'; SET @v = %d; EXECUTE s USING @v",
		"REPLACE INTO kv VALUES (1, %d) RETURNING id",
		"SET @q = '" + w + "'; PREPARE s2 FROM @q; EXECUTE s2",
	}
	const trials = 6
	v := int64(0)
	hits0 := hitsOf(t, admin, "kv")
	for _, form := range forms {
		stale := 0
		for i := 0; i < trials; i++ {
			waitSettled(t, admin, "kv", 2)
			read() // from memory: the write below must take the table off it
			v++
			q := form
			if strings.Contains(q, "%d") {
				q = fmt.Sprintf(form, v)
			}
			if err := runRequest(ctx, writer, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if got := read(); got != v {
				stale++
			}
		}
		if stale > 0 {
			t.Errorf("%s: the next read missed the write in %d of %d trials", form, stale, trials)
		}
	}
	if hitsOf(t, admin, "kv") == hits0 {
		t.Fatal("no read was answered from memory: the test did not exercise the cache")
	}
	requireNoMissedWrites(t, admin, "kv")
}

// requireNoMissedWrites fails the test when the binary log showed a write
// of table by a statement sent through the proxy whose account did not
// name it (cached_tables.missed_writes), once the log has caught up.
func requireNoMissedWrites(t *testing.T, admin *sql.DB, table string) {
	t.Helper()
	waitSettled(t, admin, table, -1)
	var n int64
	if err := admin.QueryRow("SELECT missed_writes FROM tableproxy.cached_tables WHERE table_name = '" + table + "'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%s: %d write(s) seen in the binary log escaped the account of the statement that made them (see the proxy's log for their digests)", table, n)
	}
}

// TestReturningKeepsOtherTablesCached: INSERT ... RETURNING (what Django
// sends for every create() on MariaDB) writes its own table only: reads of
// another, cached table go on being answered from memory.
func TestReturningKeepsOtherTablesCached(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 7)",
		"CREATE TABLE `"+e.db+"`.log (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(20))")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "kv", "ready", 1, 1)
	app := e.open(t, e.app)
	var v int64
	if err := app.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	const n = 40
	hits0 := hitsOf(t, admin, "kv")
	for i := 0; i < n; i++ {
		var id int64
		if err := app.QueryRow("INSERT INTO log (msg) VALUES (?) RETURNING id", fmt.Sprint("m", i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := app.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	if hits := hitsOf(t, admin, "kv") - hits0; hits < n*95/100 {
		t.Fatalf("%d of %d reads after INSERT ... RETURNING of another table answered from memory, want at least 95%%", hits, n)
	}
	requireNoMissedWrites(t, admin, "kv")
}

// TestPrivilegeChangesInAnyFormAreSeen: a REVOKE behind a read in one
// request, and SET ROLE NONE behind an executable comment the backend
// skips, take effect for the very next read, as directly.
func TestPrivilegeChangesInAnyFormAreSeen(t *testing.T) {
	e := newCacheEnv(t)
	b := e.backend
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 7)")
	role := "tpr_" + strings.ReplaceAll(e.db, "-", "_")
	if len(role) > 60 {
		role = role[:60]
	}
	reader := account{"tpu_r" + fmt.Sprint(time.Now().UnixNano()%1e8), "reader-pw"}
	hosts := []string{"127.0.0.1", "localhost", "::1"}
	var revokeFrom []string
	for _, h := range hosts {
		b.Exec(t, fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", reader.name, h, reader.password),
			fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s' WITH GRANT OPTION", e.db, e.admin.name, h))
		revokeFrom = append(revokeFrom, fmt.Sprintf("'%s'@'%s'", reader.name, h))
	}
	b.Exec(t, "CREATE ROLE "+role, fmt.Sprintf("GRANT SELECT ON `%s`.kv TO %s", e.db, role))
	for _, h := range hosts {
		b.Exec(t, fmt.Sprintf("GRANT %s TO '%s'@'%s'", role, reader.name, h))
	}
	t.Cleanup(func() {
		root := b.Root(t)
		for _, h := range hosts {
			root.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", reader.name, h))
		}
		root.Exec("DROP ROLE IF EXISTS " + role)
	})
	e.proxy.stop(t)
	e.more = []account{reader}
	e.start(t)
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "kv", "ready", 1, 1)
	ctx := context.Background()
	// (No current database: the reader may see none until its role is
	// set.)
	readerDB := testdb.Open(t, testdb.DSN(e.proxy.addr, reader.name, reader.password, "", nil))
	readWith := func(c *sql.Conn) error {
		var v int64
		return c.QueryRowContext(ctx, "SELECT v FROM `"+e.db+"`.kv WHERE id = 1").Scan(&v)
	}

	// SET ROLE NONE behind /*!99999 ... */: the role's table is refused at
	// once, as directly (1142).
	for i := 0; i < 5; i++ {
		c, err := readerDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "SET ROLE "+role); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			if err := readWith(c); err != nil {
				t.Fatalf("with the role: %v", err)
			}
		}
		if _, err := c.ExecContext(ctx, "/*!99999 SELECT 1, */ SET ROLE NONE"); err != nil {
			t.Fatal(err)
		}
		if err := readWith(c); mysqlErrNumber(err) != 1142 {
			t.Fatalf("trial %d: a read after SET ROLE NONE got %v, want error 1142 as directly", i, err)
		}
		c.Close()
	}

	// REVOKE behind a read: the reader's next read is refused.
	adminMulti := testdb.Open(t, testdb.DSN(e.proxy.addr, e.admin.name, e.admin.password, e.db, map[string]string{"multiStatements": "true"}))
	ac, err := adminMulti.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	for i := 0; i < 5; i++ {
		for _, h := range hosts {
			b.Exec(t, fmt.Sprintf("GRANT SELECT ON `%s`.kv TO '%s'@'%s'", e.db, reader.name, h))
		}
		c, err := readerDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the grant to be seen", func() (bool, error) { return readWith(c) == nil, nil })
		for j := 0; j < 3; j++ {
			if err := readWith(c); err != nil {
				t.Fatal(err)
			}
		}
		q := fmt.Sprintf("SELECT 1; REVOKE SELECT ON `%s`.kv FROM %s", e.db, strings.Join(revokeFrom, ", "))
		if err := runRequest(ctx, ac, q); err != nil {
			t.Fatal(err)
		}
		if err := readWith(c); mysqlErrNumber(err) != 1142 {
			t.Fatalf("trial %d: a read after the REVOKE got %v, want error 1142 as directly", i, err)
		}
		c.Close()
	}
}

// TestSchemaChangesOnCachedTables: DDL on a cached table runs through the
// proxy in any form (a plain ALTER, one behind a SET in one request,
// TRUNCATE, RENAME), and the very next read through the proxy answers as
// the backend does, with the new definition; a table dropped or renamed,
// through the proxy or directly on the backend, leaves the cache (state
// dropped), and a table created again under its name is an ordinary one.
func TestSchemaChangesOnCachedTables(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 10), (2, 20)")
	admin := e.open(t, e.admin)
	cache := func() {
		t.Helper()
		if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
			t.Fatal(err)
		}
	}
	cache()
	waitSettled(t, admin, "kv", 2)
	ctx := context.Background()
	multi, err := testdb.Open(t, testdb.DSN(e.proxy.addr, e.app.name, e.app.password, e.db, map[string]string{"multiStatements": "true"})).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	p := newPair(t, e, e.app)
	const q = "SELECT * FROM kv ORDER BY id"
	hits := func() int64 { return hitsOf(t, admin, "kv") }
	// A shape refused for a column the table lacks is answered from memory
	// once a DDL has added it.
	const byNewColumn = "SELECT c2 FROM kv WHERE id = 1"
	p.same(t, "a column not there yet", byNewColumn)
	for _, step := range []struct {
		ddl  string
		rows int64
	}{
		{"ALTER TABLE kv ADD COLUMN c2 INT NOT NULL DEFAULT 5", 2},
		{"SET @a = 1; ALTER TABLE kv ADD COLUMN c3 VARCHAR(10) DEFAULT 'x'", 2},
		{"ALTER TABLE kv MODIFY v BIGINT NULL, DROP COLUMN c2", 2},
		{"TRUNCATE kv; INSERT INTO kv (id, v) VALUES (7, 70)", 1},
		{"SET STATEMENT max_statement_time=0 FOR ALTER TABLE kv ADD COLUMN c4 INT", 1},
	} {
		h := hits()
		for i := 0; i < 3; i++ { // (the first may learn the shape, after an error the diagnostics)
			p.same(t, "before "+step.ddl, q)
		}
		if hits() == h {
			t.Fatalf("before %s: the reads were not answered from memory", step.ddl)
		}
		if err := runRequest(ctx, multi, step.ddl); err != nil {
			t.Fatalf("%s: %v", step.ddl, err)
		}
		p.same(t, "right after "+step.ddl, q)
		waitSettled(t, admin, "kv", step.rows)
		p.same(t, "after the reload that follows "+step.ddl, q)
		if strings.Contains(step.ddl, "ADD COLUMN c2") {
			p.same(t, "the added column", byNewColumn)
			h := hits()
			p.same(t, "the added column, again", byNewColumn)
			if hits() == h {
				t.Errorf("a shape refused before %s for the column it adds is still not answered from memory", step.ddl)
			}
		}
	}

	// Renamed through the proxy: the name leaves the cache; a table
	// created under it is an ordinary table, read from the backend.
	if err := runRequest(ctx, multi, "RENAME TABLE kv TO kv_old"); err != nil {
		t.Fatal(err)
	}
	if st, _ := cachedStatus(t, admin, "kv"); st.state != "dropped" {
		t.Fatalf("after RENAME TABLE through the proxy: state %q, want dropped", st.state)
	}
	if err := runRequest(ctx, multi, "CREATE TABLE kv (id INT PRIMARY KEY, w INT); INSERT INTO kv VALUES (1, 1)"); err != nil {
		t.Fatalf("CREATE TABLE under a name that was cached: %v", err)
	}
	p.same(t, "the new table", q)
	if st, _ := cachedStatus(t, admin, "kv"); st.state != "dropped" {
		t.Errorf("a table created again under the name: state %q, want it still listed as dropped, not cached", st.state)
	}

	// Dropped directly on the backend: the watcher sees it in the binary
	// log, and the name leaves the cache.
	cache()
	waitSettled(t, admin, "kv", 1)
	e.backend.Exec(t, "DROP TABLE `"+e.db+"`.kv")
	waitFor(t, 5*time.Second, "kv to leave the cache", func() (bool, error) {
		st, _ := cachedStatus(t, admin, "kv")
		return st.state == "dropped", fmt.Errorf("state %q", st.state)
	})
	if err := runRequest(ctx, multi, "CREATE TABLE kv (id INT PRIMARY KEY, w INT)"); err != nil {
		t.Fatalf("CREATE TABLE after a direct DROP of a cached table: %v", err)
	}
	p.same(t, "the table created after the direct DROP", q)
	var missed int64
	for _, name := range []string{"kv", "kv_old"} {
		var n sql.NullInt64
		admin.QueryRow("SELECT SUM(missed_writes) FROM tableproxy.cached_tables WHERE table_name = '" + name + "'").Scan(&n)
		missed += n.Int64
	}
	if missed != 0 {
		t.Errorf("%d write(s) escaped the account", missed)
	}
}

// TestClusterSchemaChangeOnCachedTable: DDL on a cached table through one
// proxy of a cluster, while another reads it: each read right after the
// DDL was acknowledged, through every proxy, answers as the backend does;
// every proxy loads the copy again; a DROP through one proxy takes the
// table out of every proxy's cache.
func TestClusterSchemaChangeOnCachedTable(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	f := e.follower(l)
	ctx := context.Background()
	var proxies []*sql.Conn
	for _, nd := range e.nodes {
		c, err := e.conn(t, nd, e.app).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		proxies = append(proxies, c)
	}
	direct, err := testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.cacheEnv.db, nil)).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	const q = "SELECT * FROM kv ORDER BY id"
	same := func(what string) {
		t.Helper()
		want := outcome(direct, q)
		for i, c := range proxies {
			if got := outcome(c, q); got != want {
				t.Errorf("%s, through %s: %s\nMariaDB: %s", what, e.nodes[i].id, got, want)
			}
		}
	}
	// fromMemory: every proxy answers the read from its copy (its hits
	// grow), so the comparisons above test the cache.
	admins := make([]*sql.DB, len(e.nodes))
	for i, nd := range e.nodes {
		admins[i] = e.conn(t, nd, e.admin)
		defer admins[i].Close()
	}
	fromMemory := func(what string) {
		t.Helper()
		for i, c := range proxies {
			before := e.hits(t, admins[i])
			waitFor(t, 5*time.Second, e.nodes[i].id+" to answer from memory "+what, func() (bool, error) {
				_ = outcome(c, q)
				return e.hits(t, admins[i]) > before, nil
			})
		}
	}
	ddlConn, err := e.conn(t, f, e.app).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ddlConn.Close()
	for _, ddl := range []string{"ALTER TABLE kv ADD COLUMN c2 INT NOT NULL DEFAULT 3", "TRUNCATE kv",
		"ALTER TABLE kv MODIFY c2 BIGINT"} {
		fromMemory("before " + ddl)
		same("before " + ddl)
		if _, err := ddlConn.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("%s through %s: %v", ddl, f.id, err)
		}
		same("right after " + ddl)
		// (The row back, as a write through another proxy.)
		if _, err := proxies[0].ExecContext(ctx, "REPLACE INTO kv (id, v) VALUES (1, 5)"); err != nil {
			t.Fatal(err)
		}
		same("right after a write that follows " + ddl)
		e.waitReadyEverywhere(t, "kv", 1)
		fromMemory("after " + ddl)
		same("after the reload that follows " + ddl)
	}
	if _, err := ddlConn.ExecContext(ctx, "DROP TABLE kv"); err != nil {
		t.Fatal(err)
	}
	for i, nd := range e.nodes {
		waitFor(t, 5*time.Second, "kv to leave the cache of "+nd.id, func() (bool, error) {
			var n int
			err := admins[i].QueryRow("SELECT COUNT(*) FROM tableproxy.cached_tables WHERE table_name = 'kv' AND state <> 'dropped'").Scan(&n)
			return err == nil && n == 0, err
		})
	}
	if _, err := ddlConn.ExecContext(ctx, "CREATE TABLE kv (id INT PRIMARY KEY, w INT)"); err != nil {
		t.Fatalf("CREATE TABLE under the dropped name: %v", err)
	}
	same("the new table of the name")
}
