package e2e

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// The tests in this file hold the cache to one rule: a client cannot tell
// an answer from memory from MariaDB's. Each runs the same statements, in
// the same order and with the same session settings, through the proxy and
// directly against MariaDB, and compares what the client sees: rows and
// column definitions, or the error's number, SQLSTATE and message, or the
// raw bytes of the column definitions and the status word. Every statement
// shape runs at least twice through the proxy before the comparison that
// matters, since the proxy answers a shape from memory only once it has
// learned its column definitions from the backend's first answer.

var fidelityHosts = []string{"127.0.0.1", "localhost", "::1"}

// newFidelityEnv is newCacheEnv whose proxy also accepts one user per name
// in extra, each with no privilege yet beyond USAGE on the test's database:
// the test grants what it needs on the backend.
func newFidelityEnv(t *testing.T, extra ...string) (*cacheEnv, map[string]account) {
	t.Helper()
	e := newCacheEnvUnstarted(t, "plugins:\n  - name: cache\n    options: {max_table_size: 1MB}\n")
	b := e.backend
	users := map[string]account{}
	proxyUsers := []account{e.app}
	for _, name := range extra {
		pw := name + "-pw"
		a := account{b.NewUser(t, pw, "USAGE", e.db), pw}
		users[name] = a
		proxyUsers = append(proxyUsers, a)
	}
	e.proxy = startProxyOpts(t, b.Addr, proxyUsers, proxyOpts{yaml: e.yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	return e, users
}

// grantEverywhere runs a GRANT, REVOKE or similar statement on the
// backend once per host of a test user; %s in stmt is the account.
func grantEverywhere(t *testing.T, b testdb.Backend, stmt, user string) {
	t.Helper()
	for _, host := range fidelityHosts {
		b.Exec(t, fmt.Sprintf(stmt, fmt.Sprintf("'%s'@'%s'", user, host)))
	}
}

// cacheTables caches each table (name to row count) as the admin and
// waits until its copy is ready and the binary log is being followed.
func cacheTables(t *testing.T, e *cacheEnv, tables map[string]int64) *sql.DB {
	t.Helper()
	admin := e.open(t, e.admin)
	for name := range tables {
		if _, err := admin.Exec("ALTER TABLE " + name + " CACHE"); err != nil {
			t.Fatalf("ALTER TABLE %s CACHE: %v", name, err)
		}
	}
	for name, rows := range tables {
		waitSettled(t, admin, name, rows)
	}
	return admin
}

// memoryHits counts the reads of table answered from memory, by the
// evaluator or the result cache.
func memoryHits(t *testing.T, admin *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := admin.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = '" + table + "'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// errText renders an error as the mysql client prints it, with all that
// MariaDB sends: number, SQLSTATE and message.
func errText(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("ERROR %d (%s): %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	return "error: " + err.Error()
}

// pair is one session through the proxy and one directly to MariaDB, for
// the same user.
type pair struct {
	proxy, direct *sql.Conn
}

func newPair(t *testing.T, e *cacheEnv, a account) pair {
	t.Helper()
	ctx := context.Background()
	conn := func(addr string) *sql.Conn {
		c, err := testdb.Open(t, testdb.DSN(addr, a.name, a.password, e.db, nil)).Conn(ctx)
		if err != nil {
			t.Fatalf("connect to %s as %s: %v", addr, a.name, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return pair{proxy: conn(e.proxy.addr), direct: conn(e.backend.Addr)}
}

// outcome runs a statement (prepared, in the binary protocol, when it has
// arguments) and renders its column metadata and values, or its error.
// (The driver reformats integers of the text protocol: rawResult compares
// bytes.)
func outcome(conn *sql.Conn, q string, args ...any) string {
	rows, err := conn.QueryContext(context.Background(), q, args...)
	if err != nil {
		return errText(err)
	}
	return dumpRows(rows)
}

// same runs q on MariaDB, then through the proxy, and reports a difference.
func (p pair) same(t *testing.T, what, q string, args ...any) bool {
	t.Helper()
	want := outcome(p.direct, q, args...)
	got := outcome(p.proxy, q, args...)
	if got != want {
		from, why := lastServedFrom(t, p.proxy)
		t.Errorf("%s: %s %v\nproxy:   %s\nMariaDB: %s\n(the proxy's answer came from the %s: %s)", what, q, args, got, want, from, why)
		return false
	}
	return true
}

// both runs a statement that must succeed in both sessions.
func (p pair) both(t *testing.T, q string) {
	t.Helper()
	for name, c := range map[string]*sql.Conn{"proxy": p.proxy, "MariaDB": p.direct} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %s: %v", name, q, err)
		}
	}
}

// TestFidelityPrivileges: MariaDB checks a user's table and column
// privileges on every statement; an answer from memory must not skip that
// check, whoever taught the proxy the statement's shape, and must follow
// a REVOKE made directly on MariaDB (within a bounded delay) or through
// the proxy (at once).
func TestFidelityPrivileges(t *testing.T) {
	e, users := newFidelityEnv(t, "ro", "none", "rv", "rv2")
	tbl := "`" + e.db + "`.secret"
	e.backend.Exec(t,
		"CREATE TABLE "+tbl+" (id INT PRIMARY KEY, pub INT, priv INT)",
		"INSERT INTO "+tbl+" VALUES (1, 10, 100), (2, 20, 200), (3, 30, 300)",
		"CREATE TABLE `"+e.db+"`.other (id INT PRIMARY KEY)")
	grantEverywhere(t, e.backend, "GRANT SELECT (id, pub) ON "+tbl+" TO %s", users["ro"].name)
	grantEverywhere(t, e.backend, "GRANT SELECT ON `"+e.db+"`.other TO %s", users["none"].name)
	for _, u := range []string{"rv", "rv2"} {
		// (other: so that they may still connect to the database after
		// the REVOKE.)
		grantEverywhere(t, e.backend, "GRANT SELECT ON "+tbl+" TO %s", users[u].name)
		grantEverywhere(t, e.backend, "GRANT SELECT ON `"+e.db+"`.other TO %s", users[u].name)
	}
	grantEverywhere(t, e.backend, "GRANT ALL ON `"+e.db+"`.* TO %s WITH GRANT OPTION", e.admin.name)
	admin := cacheTables(t, e, map[string]int64{"secret": 3})

	shapes := []string{
		"SELECT id, pub FROM secret WHERE id = 2",
		"SELECT id, priv FROM secret WHERE id = 2",
		"SELECT id, pub FROM secret WHERE priv = 200",
		"SELECT * FROM secret WHERE id = 2",
		"SELECT COUNT(*) FROM secret",
	}
	// The admin teaches the proxy every shape.
	adminConn := newPair(t, e, e.admin)
	for _, q := range shapes {
		for i := 0; i < 2; i++ {
			adminConn.same(t, "admin", q)
		}
	}

	t.Run("column grant", func(t *testing.T) {
		p := newPair(t, e, users["ro"])
		for _, q := range shapes {
			for i := 0; i < 2; i++ {
				p.same(t, "user with SELECT (id, pub)", q)
			}
		}
	})

	t.Run("no grant", func(t *testing.T) {
		p := newPair(t, e, users["none"])
		for _, q := range shapes {
			for i := 0; i < 2; i++ {
				p.same(t, "user without SELECT on the table", q)
			}
		}
	})

	// After a REVOKE the proxy may reload the table (it may take the
	// statement for a write); the reads that matter come after that, in
	// sessions that have not yet been refused (after an error the proxy
	// sends the next read to the backend anyway).
	t.Run("revoked on the backend", func(t *testing.T) {
		p := newPair(t, e, users["rv"])
		q := shapes[0]
		before := memoryHits(t, admin, "secret")
		for i := 0; i < 2; i++ {
			p.same(t, "before REVOKE", q)
		}
		if memoryHits(t, admin, "secret") == before {
			t.Logf("note: %s was not answered from memory before the REVOKE", q)
		}
		v := versionOf(t, admin, "secret")
		grantEverywhere(t, e.backend, "REVOKE SELECT ON "+tbl+" FROM %s", users["rv"].name)
		// MariaDB applies the REVOKE to the next statement; the proxy
		// learns of it from the binary log, a moment later: 2 s is ample.
		waitReloaded(t, admin, "secret", v, 2*time.Second)
		for i := 0; i < 2; i++ {
			p.same(t, "after REVOKE on MariaDB, session that read before", q)
		}
		fresh := newPair(t, e, users["rv"])
		for i := 0; i < 2; i++ {
			fresh.same(t, "after REVOKE on MariaDB, new session", q)
		}
	})

	t.Run("revoked through the proxy", func(t *testing.T) {
		p, later := newPair(t, e, users["rv2"]), newPair(t, e, users["rv2"])
		q := shapes[0]
		for i := 0; i < 2; i++ {
			p.same(t, "before REVOKE", q)
			later.same(t, "before REVOKE", q)
		}
		var accounts []string
		for _, host := range fidelityHosts {
			accounts = append(accounts, fmt.Sprintf("'%s'@'%s'", users["rv2"].name, host))
		}
		v := versionOf(t, admin, "secret")
		if _, err := adminConn.proxy.ExecContext(context.Background(), "REVOKE SELECT ON "+tbl+" FROM "+strings.Join(accounts, ", ")); err != nil {
			t.Fatalf("REVOKE through the proxy: %v", err)
		}
		p.same(t, "right after REVOKE through the proxy", q)
		waitReloaded(t, admin, "secret", v, 2*time.Second)
		for i := 0; i < 2; i++ {
			later.same(t, "after REVOKE through the proxy, once the table is in memory again", q)
		}
	})
}

// waitReloaded waits up to d for table's copy to be ready at a version
// after v, and goes on without failing if it is not.
func waitReloaded(t *testing.T, admin *sql.DB, table string, v int64, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if state, _, nv, _ := cachedState(t, admin, table); state == "ready" && nv > v {
			return
		}
	}
}

// TestFidelityRoles: a role's privileges hold only while the role is the
// session's current role. After SET ROLE NONE MariaDB refuses the table;
// so must the proxy, both for a shape the evaluator answers and for one
// the result cache answers.
func TestFidelityRoles(t *testing.T) {
	e, users := newFidelityEnv(t, "rr")
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, n INT, s VARCHAR(10))",
		"INSERT INTO `"+e.db+"`.t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')",
		"CREATE TABLE `"+e.db+"`.other (id INT PRIMARY KEY)")
	role := "tpr_" + strings.TrimPrefix(users["rr"].name, "tpu_")
	e.backend.Exec(t, "CREATE ROLE `"+role+"`", "GRANT SELECT ON `"+e.db+"`.t TO `"+role+"`")
	t.Cleanup(func() {
		db := e.backend.Root(t)
		db.Exec("DROP ROLE IF EXISTS `" + role + "`")
	})
	grantEverywhere(t, e.backend, "GRANT `"+role+"` TO %s", users["rr"].name)
	grantEverywhere(t, e.backend, "GRANT SELECT ON `"+e.db+"`.other TO %s", users["rr"].name)
	admin := cacheTables(t, e, map[string]int64{"t": 3})

	for _, c := range []struct{ name, q string }{
		{"evaluator", "SELECT id, n FROM t WHERE id = 1"},
		{"result cache", "SELECT id, UPPER(s) FROM t WHERE id = 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, e, users["rr"])
			p.both(t, "SET ROLE `"+role+"`")
			before := memoryHits(t, admin, "t")
			for i := 0; i < 3; i++ {
				p.same(t, "with the role", c.q)
			}
			if memoryHits(t, admin, "t") == before {
				t.Logf("note: %s was not answered from memory with the role set", c.q)
			}
			p.both(t, "SET ROLE NONE")
			for i := 0; i < 2; i++ {
				p.same(t, "after SET ROLE NONE", c.q)
			}
			p.both(t, "SET ROLE `"+role+"`")
			p.same(t, "with the role again", c.q)
		})
	}
}

// fidelityTable creates t (id, n, s) with three rows, caches it, and
// returns the admin's handle and a session pair for the application user.
func fidelityTable(t *testing.T) (*cacheEnv, *sql.DB, pair) {
	t.Helper()
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, n INT, s VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci)",
		"INSERT INTO `"+e.db+"`.t VALUES (1, 10, 'abc'), (2, 20, 'def'), (3, 30, 'ghi')")
	admin := cacheTables(t, e, map[string]int64{"t": 3})
	return e, admin, newPair(t, e, e.app)
}

// TestFidelitySqlSelectLimit: sql_select_limit caps the rows of every
// top-level SELECT without a LIMIT, in both protocols.
func TestFidelitySqlSelectLimit(t *testing.T) {
	_, _, p := fidelityTable(t)
	text, prepared := "SELECT id FROM t", "SELECT id FROM t WHERE id > ?"
	for i := 0; i < 2; i++ {
		p.same(t, "default limit", text)
		p.same(t, "default limit, prepared", prepared, 0)
	}
	p.both(t, "SET sql_select_limit = 1")
	for i := 0; i < 2; i++ {
		p.same(t, "sql_select_limit = 1", text)
		p.same(t, "sql_select_limit = 1, prepared", prepared, 0)
		p.same(t, "sql_select_limit = 1, explicit LIMIT", "SELECT id FROM t LIMIT 2")
	}
}

// TestFidelityMaxJoinSize: with max_join_size below the rows a SELECT
// would examine, MariaDB refuses it with error 1104.
func TestFidelityMaxJoinSize(t *testing.T) {
	_, _, p := fidelityTable(t)
	q := "SELECT id FROM t"
	for i := 0; i < 2; i++ {
		p.same(t, "default max_join_size", q)
	}
	p.both(t, "SET max_join_size = 1")
	for i := 0; i < 2; i++ {
		p.same(t, "max_join_size = 1", q)
	}
}

// TestFidelityVersionedComments: MariaDB runs /*!NNNNN ... */ only for
// versions it takes for its own; those of MySQL 5.7 and later (50700 to
// 99999) are plain comments to it.
func TestFidelityVersionedComments(t *testing.T) {
	_, _, p := fidelityTable(t)
	for _, q := range []string{
		"SELECT id FROM t WHERE id = 1 /*!80000 + 1 */",
		"SELECT id FROM t WHERE id = 1 /*!50700 + 1 */",
		"SELECT id FROM t WHERE id = 1 /*!99999 OR id = 2 */",
		"SELECT id FROM t WHERE id = 1 /*!50600 + 1 */", // run by MariaDB
	} {
		for i := 0; i < 3; i++ {
			p.same(t, "executable comment", q)
		}
	}
}

// TestFidelityZerofill: in the text protocol MariaDB prints a ZEROFILL
// column's values padded ("00007"), but MIN and MAX of it are new values,
// printed without the padding ("7"). Compared byte for byte.
func TestFidelityZerofill(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.z1 (id INT PRIMARY KEY, g INT, zf INT(5) ZEROFILL)",
		"INSERT INTO `"+e.db+"`.z1 VALUES (1, 1, 7), (2, 1, 42)")
	cacheTables(t, e, map[string]int64{"z1": 2})
	p := newRawPair(t, e, e.app)
	for _, q := range []string{
		"SELECT MIN(zf) FROM z1",
		"SELECT MAX(zf) FROM z1",
		"SELECT MIN(zf), MAX(zf) FROM z1 WHERE id > 0",
		"SELECT g, MIN(zf), MAX(zf) FROM z1 GROUP BY g ORDER BY g",
		"SELECT zf FROM z1 WHERE id = 1",
	} {
		for i := 0; i < 2; i++ {
			p.same(t, "ZEROFILL", q)
		}
	}
}

// TestFidelityRegexFlags: default_regex_flags changes what REGEXP
// matches, so an answer stored under other flags must not be replayed.
func TestFidelityRegexFlags(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.rx (id INT PRIMARY KEY, s VARCHAR(20))",
		"INSERT INTO `"+e.db+"`.rx VALUES (1, 'a\\nb'), (2, 'AB'), (3, 'ab')")
	admin := cacheTables(t, e, map[string]int64{"rx": 3})
	p := newPair(t, e, e.app)
	q := "SELECT id FROM rx WHERE s REGEXP 'a.b'"
	// Until the result cache answers it.
	stored := false
	for deadline := time.Now().Add(3 * time.Second); !stored && time.Now().Before(deadline); {
		before := memoryHits(t, admin, "rx")
		p.same(t, "default flags", q)
		stored = memoryHits(t, admin, "rx") > before
	}
	if !stored {
		t.Logf("note: %s was not answered from memory with the default flags", q)
	}
	p.both(t, "SET default_regex_flags = 'DOTALL,MULTILINE'")
	for i := 0; i < 2; i++ {
		p.same(t, "DOTALL,MULTILINE", q)
	}
}

// rawSession is a go-mysql client session, which keeps the raw bytes of
// column definitions and rows and the status word of the final packet
// (go-sql-driver reformats integers of the text protocol).
func rawSession(t *testing.T, addr string, a account, db string) *client.Conn {
	t.Helper()
	// The collation go-sql-driver uses, which MariaDB knows (go-mysql's
	// default, utf8mb4_0900_ai_ci, would leave the session in latin1).
	c, err := client.ConnectWithTimeout(addr, a.name, a.password, db, 5*time.Second,
		func(c *client.Conn) error { return c.SetCollation("utf8mb4_general_ci") })
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawResult renders everything of a result the client receives, byte for
// byte, or the error.
func rawResult(r *gomysql.Result, err error) string {
	if err != nil {
		var me *gomysql.MyError
		if errors.As(err, &me) {
			return fmt.Sprintf("ERROR %d (%s): %s", me.Code, me.State, me.Message)
		}
		return "error: " + err.Error()
	}
	defer r.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "status=%#04x warnings=%d", r.Status, r.Warnings)
	if r.Resultset != nil {
		for _, f := range r.Fields {
			fmt.Fprintf(&b, "\n  field %s: %s", f.Name, hex.EncodeToString(f.Data))
		}
		for _, row := range r.RowDatas {
			fmt.Fprintf(&b, "\n  row %s", hex.EncodeToString(row))
		}
	}
	return b.String()
}

// rawPair is pair for go-mysql sessions.
type rawPair struct {
	proxy, direct *client.Conn
}

func newRawPair(t *testing.T, e *cacheEnv, a account) rawPair {
	t.Helper()
	return rawPair{proxy: rawSession(t, e.proxy.addr, a, e.db), direct: rawSession(t, e.backend.Addr, a, e.db)}
}

func (p rawPair) same(t *testing.T, what, q string, args ...any) {
	t.Helper()
	want := rawResult(p.direct.Execute(q, args...))
	got := rawResult(p.proxy.Execute(q, args...))
	if got != want {
		t.Errorf("%s: %s %v\nproxy:\n%s\nMariaDB:\n%s\n(the proxy's answer came from the %s)", what, q, args, got, want, p.servedFrom())
	}
}

// servedFrom is EXPLAIN LAST STATEMENT's answer in the proxy session.
func (p rawPair) servedFrom() string {
	r, err := p.proxy.Execute("EXPLAIN LAST STATEMENT")
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	from, _ := r.GetString(0, 1)
	why, _ := r.GetString(0, 2)
	return from + ": " + why
}

// TestFidelityStatusWord: the status word at the end of a result set is
// MariaDB's own for that statement: SERVER_QUERY_NO_INDEX_USED (0x20) is
// set by a full scan, not carried over from another statement, nor from an
// execution of the same shape with LIMIT 0 (which reads no table). (An
// answer from memory carries the bits of its shape's first execution: for
// values that make the backend choose another plan they may differ; see
// docs/cached-tables.md, "Session state".)
func TestFidelityStatusWord(t *testing.T) {
	e, _, _ := fidelityTable(t)
	p := newRawPair(t, e, e.app)
	for _, q := range []string{
		"SELECT * FROM t WHERE n + 0 > 0 AND UPPER(s) <> ''", // a full scan, at the backend
		"SELECT id FROM t WHERE id > 2",
		"SELECT id FROM t WHERE id > 2",
		"SELECT * FROM t", // a full scan
		"SELECT id FROM t WHERE id > 2",
		"SELECT id FROM t WHERE id > 0",
		"SELECT id FROM t WHERE id > 1",
		"SELECT id FROM t ORDER BY id LIMIT 2",
		"SELECT id FROM t ORDER BY id LIMIT 2",
		"SELECT id FROM t ORDER BY id LIMIT 0",
		"SELECT id FROM t ORDER BY id LIMIT 0",
	} {
		p.same(t, "status word", q)
	}
}

// TestFidelityColumnDefinitions: a column definition is the one MariaDB
// sends for this execution: a string column's character set follows the
// session's collation_connection (SET NAMES), and the length of an
// expression over a parameter follows the parameter's type.
func TestFidelityColumnDefinitions(t *testing.T) {
	e, _, _ := fidelityTable(t)
	t.Run("SET NAMES", func(t *testing.T) {
		p := newRawPair(t, e, e.app)
		q := "SELECT id, s FROM t WHERE s = 'abc'"
		for i := 0; i < 2; i++ {
			p.same(t, "default names", q)
		}
		p.same(t, "SET NAMES", "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")
		for i := 0; i < 2; i++ {
			p.same(t, "after SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", q)
		}
	})
	t.Run("parameter type", func(t *testing.T) {
		// One statement, prepared once and executed with parameters of
		// different types.
		p := newRawPair(t, e, e.app)
		q := "SELECT id, n + ? FROM t WHERE id = 1"
		ps, err := p.proxy.Prepare(q)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		ds, err := p.direct.Prepare(q)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		for _, arg := range []any{5, 5, 5, nil, nil, int8(5), int8(5), nil, uint64(5), uint64(5)} {
			want, got := rawResult(ds.Execute(arg)), rawResult(ps.Execute(arg))
			if got != want {
				t.Errorf("%s with a parameter %T(%v):\nproxy:\n%s\nMariaDB:\n%s\n(the proxy's answer came from the %s)", q, arg, arg, got, want, p.servedFrom())
			}
		}
	})
}

// TestFidelityAutocommitOff: with autocommit off, a session's first read
// starts a transaction whose snapshot later reads keep, as does the first
// read of an explicit transaction that reaches the backend; a write that
// commits meanwhile is not seen until the transaction ends.
func TestFidelityAutocommitOff(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 10), (2, 20)",
		"CREATE TABLE `"+e.db+"`.other (id INT PRIMARY KEY)",
		"INSERT INTO `"+e.db+"`.other VALUES (1)")
	admin := cacheTables(t, e, map[string]int64{"kv": 2})
	q := "SELECT id, v FROM kv WHERE id = 2"
	bump := func(t *testing.T) {
		t.Helper()
		v := versionOf(t, admin, "kv")
		e.backend.Exec(t, "UPDATE `"+e.db+"`.kv SET v = v + 1 WHERE id = 2")
		// The proxy has the new value in memory.
		waitState(t, admin, "kv", "ready", 2, v+1)
	}

	t.Run("autocommit=0", func(t *testing.T) {
		p := newPair(t, e, e.app)
		for i := 0; i < 2; i++ {
			p.same(t, "autocommit on", q)
		}
		p.both(t, "SET autocommit = 0")
		p.same(t, "first read with autocommit off", q)
		bump(t)
		for i := 0; i < 2; i++ {
			p.same(t, "after a write committed by another session", q)
		}
		p.both(t, "COMMIT")
		p.same(t, "after COMMIT", q)
		p.both(t, "SET autocommit = 1")
	})

	t.Run("BEGIN", func(t *testing.T) {
		p := newPair(t, e, e.app)
		for i := 0; i < 2; i++ {
			p.same(t, "outside a transaction", q)
		}
		p.both(t, "BEGIN")
		// Never answered from memory: it reaches the backend and takes the
		// transaction's snapshot there.
		p.same(t, "first read in the transaction", "SELECT id, v, CONNECTION_ID() > 0 FROM kv ORDER BY id")
		bump(t)
		for i := 0; i < 2; i++ {
			p.same(t, "after a write committed by another session", q)
		}
		p.both(t, "COMMIT")
		p.same(t, "after COMMIT", q)
	})

	// The backend's snapshot is taken by the transaction's first read of
	// any table there, or at once WITH CONSISTENT SNAPSHOT: a cached table
	// first read after it must be read as of that snapshot.
	for name, start := range map[string][]string{
		"an uncached table read first": {"BEGIN", "SELECT COUNT(*) FROM other"},
		"WITH CONSISTENT SNAPSHOT":     {"START TRANSACTION WITH CONSISTENT SNAPSHOT"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPair(t, e, e.app)
			for i := 0; i < 2; i++ {
				p.same(t, "outside a transaction", q)
			}
			for _, s := range start {
				p.both(t, s)
			}
			bump(t)
			for i := 0; i < 2; i++ {
				p.same(t, "first read of a cached table after a write committed by another session", q)
			}
			p.both(t, "COMMIT")
			p.same(t, "after COMMIT", q)
		})
	}
}

// TestFidelityTemporaryTables: a temporary table hides the base table of
// the same name, in its session only, however it was created (directly,
// by a prepared statement, or in a procedure), until it is dropped.
func TestFidelityTemporaryTables(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, n INT)",
		"INSERT INTO `"+e.db+"`.t VALUES (1, 10), (2, 20)",
		"CREATE PROCEDURE `"+e.db+"`.mk() BEGIN CREATE TEMPORARY TABLE t (PRIMARY KEY (id)) SELECT 1 AS id, 999 AS n; END")
	admin := cacheTables(t, e, map[string]int64{"t": 2})
	const create = "CREATE TEMPORARY TABLE t (PRIMARY KEY (id)) SELECT 1 AS id, 999 AS n"
	q := "SELECT id, n FROM t WHERE id = 1"
	others := newPair(t, e, e.app)
	for i := 0; i < 2; i++ {
		others.same(t, "before any temporary table", q)
	}

	t.Run("CREATE TEMPORARY TABLE", func(t *testing.T) {
		p := newPair(t, e, e.app)
		p.same(t, "", q)
		p.same(t, "create", create)
		for i := 0; i < 2; i++ {
			p.same(t, "with the temporary table", q)
			others.same(t, "another session", q)
		}
		p.same(t, "drop", "DROP TEMPORARY TABLE t")
		for i := 0; i < 2; i++ {
			p.same(t, "after DROP TEMPORARY TABLE", q)
		}
	})

	for _, c := range []struct {
		name  string
		stmts []string
	}{
		{"PREPARE and EXECUTE", []string{"SET @q = '" + create + "'", "PREPARE s FROM @q", "EXECUTE s"}},
		{"CALL", []string{"CALL mk()"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, e, e.app)
			p.same(t, "", q)
			v := versionOf(t, admin, "t")
			for _, s := range c.stmts {
				p.same(t, "create", s)
			}
			// The statement may have been taken for a write of the table:
			// let its copy be reloaded first.
			waitReloaded(t, admin, "t", v, 3*time.Second)
			for i := 0; i < 3; i++ {
				p.same(t, "with the temporary table", q)
			}
			others.same(t, "another session", q)
		})
	}
}

// TestFidelityViewsAndLocks: a view over a cached table and LOCK TABLES of
// one leave the table as it is, and MariaDB accepts them; DDL that changes
// the cached table itself runs, and reads after it see what it did.
func TestFidelityViewsAndLocks(t *testing.T) {
	e, _, p := fidelityTable(t)
	t.Run("view", func(t *testing.T) {
		p.same(t, "CREATE OR REPLACE VIEW", "CREATE OR REPLACE VIEW vt AS SELECT id, n FROM t")
		for i := 0; i < 2; i++ {
			p.same(t, "read of the view", "SELECT id, n FROM vt ORDER BY id")
		}
	})
	t.Run("LOCK TABLES", func(t *testing.T) {
		q := "SELECT id, n FROM t WHERE id = 1"
		for i := 0; i < 2; i++ {
			p.same(t, "before LOCK TABLES", q)
		}
		p.same(t, "LOCK TABLES", "LOCK TABLES t READ")
		for i := 0; i < 2; i++ {
			p.same(t, "under LOCK TABLES t READ", q)
			p.same(t, "under LOCK TABLES t READ, another table", "SELECT COUNT(*) FROM vt")
		}
		p.same(t, "UNLOCK TABLES", "UNLOCK TABLES")
		p.same(t, "after UNLOCK TABLES", q)
	})
	t.Run("DDL on the cached table", func(t *testing.T) {
		// It runs, as directly, and reads right after it answer as the
		// backend does, with the new definition.
		admin := e.open(t, e.admin)
		q := "SELECT * FROM t ORDER BY id"
		for _, ddl := range []string{"ALTER TABLE t ADD COLUMN x INT DEFAULT 7", "TRUNCATE t", "RENAME TABLE t TO t2"} {
			p.same(t, "before "+ddl, q)
			if _, err := p.proxy.ExecContext(context.Background(), ddl); err != nil {
				t.Fatalf("%s: %v", ddl, err)
			}
			p.same(t, "after "+ddl, q)
			p.same(t, "after "+ddl+", again", q)
		}
		if st, _ := cachedStatus(t, admin, "t"); st.state != "dropped" {
			t.Errorf("after RENAME TABLE: state %q, want dropped", st.state)
		}
	})
}

// TestFidelityFoundRowsAndRowCount: FOUND_ROWS() and ROW_COUNT() describe
// the session's previous statement, even when the proxy answered it.
func TestFidelityFoundRowsAndRowCount(t *testing.T) {
	e, admin, p := fidelityTable(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.log (id INT AUTO_INCREMENT PRIMARY KEY, x INT)")
	for _, q := range []string{"SELECT id, n FROM t LIMIT 2", "SELECT id, n FROM t LIMIT 0", "SELECT id, n FROM t WHERE id = 1"} {
		t.Run(q, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				p.same(t, "read", q)
			}
			// The backend's previous statement found another number of
			// rows than the read.
			p.same(t, "a statement at the backend", "SELECT 1 UNION SELECT 2 UNION SELECT 3")
			before := memoryHits(t, admin, "t")
			p.same(t, "read", q)
			if memoryHits(t, admin, "t") == before {
				t.Logf("note: %s was not answered from memory", q)
			}
			p.same(t, "FOUND_ROWS() after "+q, "SELECT FOUND_ROWS()")
			p.same(t, "INSERT", "INSERT INTO log (x) VALUES (1)")
			p.same(t, "read after INSERT", q)
			p.same(t, "ROW_COUNT() after "+q, "SELECT ROW_COUNT()")
		})
	}
}

// TestFidelityOrderByUnrankedString: ORDER BY a string column whose table
// holds a value too long to rank within max_sort_length sorts the rows it
// selects by their collation keys. (Ranks stand in for strings only when
// every value of the column has one; such a column must not reach the
// packed integer sort, where its keys would all be zero and the rows would
// keep their primary-key order.)
func TestFidelityOrderByUnrankedString(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.u (id INT PRIMARY KEY, s VARCHAR(700) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, n INT)",
		"INSERT INTO `"+e.db+"`.u VALUES (1, 'pear', 5), (2, 'Apple', 3), (3, 'fig', 9), (4, 'banana', 1), (5, 'Cherry', 7), (6, 'date', 2), "+
			// 600 characters: a sort key of 1,200 bytes, past the default
			// max_sort_length of 1,024.
			"(7, REPEAT('z', 600), 4)")
	admin := cacheTables(t, e, map[string]int64{"u": 7})
	p := newPair(t, e, e.app)
	queries := []string{
		"SELECT id, s FROM u WHERE id <= 6 ORDER BY s",
		"SELECT id, s FROM u WHERE id <= 6 ORDER BY s DESC",
		"SELECT id FROM u WHERE id BETWEEN 2 AND 6 ORDER BY s LIMIT 3",
		"SELECT id, n FROM u ORDER BY n DESC", // a number: the packed sort
	}
	// The first round teaches the proxy the shapes (and this user's right
	// to them); the second must be answered from memory.
	for round := 0; round < 2; round++ {
		before := memoryHits(t, admin, "u")
		for _, q := range queries {
			p.same(t, "order", q)
		}
		if hits := memoryHits(t, admin, "u") - before; round == 1 && hits != int64(len(queries)) {
			t.Errorf("%d of the %d reads answered from memory, want all: the test needs the proxy to sort", hits, len(queries))
		}
	}
}
