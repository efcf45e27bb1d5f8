package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

func TestQueriesMatchDirect(t *testing.T) {
	f := newFixture(t, nil)
	direct := testdb.Open(t, f.directDSN(map[string]string{"multiStatements": "true"}))
	mustExec(t, direct,
		"CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20), d DECIMAL(10,3), n INT NULL)",
		"INSERT INTO t (v, d, n) VALUES ('a', 1.5, NULL), ('b', -2.25, 7), ('c', 0, 0)")
	for _, params := range []map[string]string{
		{"interpolateParams": "true"}, // text protocol
		nil,                           // prepared statements
	} {
		px := f.proxyDB(t, params)
		dx := testdb.Open(t, f.directDSN(params))
		q := "SELECT id, v, d, n, CONCAT(v, ?) FROM t WHERE id >= ? ORDER BY id"
		got := dump(t, px, q, "-x", 1)
		want := dump(t, dx, q, "-x", 1)
		if got != want {
			t.Errorf("params %v:\nproxy:  %s\ndirect: %s", params, got, want)
		}
		res, err := px.Exec("UPDATE t SET n = IFNULL(n, 0) + 1 WHERE id <= ?", 2)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			t.Errorf("affected rows %d, want 2", n)
		}
		res, err = px.Exec("INSERT INTO t (v) VALUES (?)", "z")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		if want := queryString(t, dx, "SELECT MAX(id) FROM t"); fmt.Sprint(id) != want {
			t.Errorf("last insert id %d, want %s", id, want)
		}
	}
}

// dump renders a query's column types and rows as one string.
func dump(t testing.TB, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	cts, _ := rows.ColumnTypes()
	for _, ct := range cts {
		n, _ := ct.Nullable()
		p, s, _ := ct.DecimalSize()
		l, _ := ct.Length()
		fmt.Fprintf(&b, "%s:%s:%v:%d,%d:%d ", ct.Name(), ct.DatabaseTypeName(), n, p, s, l)
	}
	vals := make([]sql.RawBytes, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		b.WriteString("|")
		for _, v := range vals {
			if v == nil {
				b.WriteString("NULL,")
			} else {
				fmt.Fprintf(&b, "%q,", v)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestBackendErrorsPassThrough(t *testing.T) {
	f := newFixture(t, nil)
	px := f.proxyDB(t, nil)
	dx := testdb.Open(t, f.directDSN(nil))
	mustExec(t, dx, "CREATE TABLE u (id INT PRIMARY KEY)", "INSERT INTO u VALUES (1)")
	for _, q := range []string{"INSERT INTO u VALUES (1)", "SELEC 1", "SELECT * FROM missing"} {
		_, perr := px.Exec(q)
		_, derr := dx.Exec(q)
		pe, de := myErr(t, perr), myErr(t, derr)
		if pe.Number != de.Number || pe.SQLState != de.SQLState || pe.Message != de.Message {
			t.Errorf("%s: proxy %v (%s), direct %v (%s)", q, pe, pe.SQLState, de, de.SQLState)
		}
	}
	// The session survives errors.
	if got := queryString(t, px, "SELECT 'alive'"); got != "alive" {
		t.Fatal(got)
	}
}

func TestSessionStateAndTransactions(t *testing.T) {
	f := newFixture(t, nil)
	px := f.proxyDB(t, nil)
	mustExec(t, px, "CREATE TABLE acct (id INT PRIMARY KEY, bal INT)", "INSERT INTO acct VALUES (1, 100)")
	ctx := context.Background()
	conn, err := px.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range []string{"SET @x = 42", "SET SESSION sql_mode = 'ANSI_QUOTES'", "CREATE TEMPORARY TABLE tmp (a INT)", "INSERT INTO tmp VALUES (5)", "BEGIN", "UPDATE acct SET bal = 0 WHERE id = 1"} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if got := queryString(t, conn, `SELECT CONCAT(@x, '/', @@sql_mode, '/', (SELECT a FROM tmp))`); got != "42/ANSI_QUOTES/5" {
		t.Errorf("session state %q", got)
	}
	// Another session does not see the uncommitted update.
	if got := queryString(t, px, "SELECT bal FROM acct WHERE id = 1"); got != "100" {
		t.Errorf("uncommitted update visible: %s", got)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, conn, "SELECT bal FROM acct WHERE id = 1"); got != "100" {
		t.Errorf("rolled back update visible: %s", got)
	}
}

func TestPooledConnectionIsReset(t *testing.T) {
	f := newFixture(t, nil)
	dsn := f.proxyDSN(nil)
	first := testdb.Open(t, dsn)
	first.SetMaxOpenConns(1)
	conn, _ := first.Conn(context.Background())
	mustConnExec(t, conn, "SET @leak = 'secret'", "CREATE TEMPORARY TABLE leak (a INT)", "BEGIN", "CREATE TABLE IF NOT EXISTS marker (a INT)")
	thread := queryString(t, conn, "SELECT CONNECTION_ID()")
	conn.Close()
	first.Close() // ends the session; its backend connection goes back to the pool

	// Once the connection is back in the pool, the next session as the same
	// user and database gets it; it must carry nothing over.
	waitFor(t, func() bool {
		f.px.srv.pool.mu.Lock()
		defer f.px.srv.pool.mu.Unlock()
		return f.px.srv.pool.nIdle == 1
	})
	db := testdb.Open(t, dsn)
	db.SetMaxOpenConns(1)
	if got := queryString(t, db, "SELECT CONNECTION_ID()"); got != thread {
		t.Fatalf("backend thread %s, want the pooled %s", got, thread)
	}
	if v := queryString(t, db, "SELECT @leak"); v != "" {
		t.Errorf("user variable survived reuse: %q", v)
	}
	if _, err := db.Exec("SELECT * FROM leak"); err == nil {
		t.Error("temporary table survived reuse")
	}
	if v := queryString(t, db, "SELECT @@in_transaction"); v != "0" {
		t.Errorf("transaction survived reuse: in_transaction=%s", v)
	}
}

func mustConnExec(t testing.TB, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestAuthentication(t *testing.T) {
	for _, plugin := range []string{gomysql.AUTH_NATIVE_PASSWORD, gomysql.AUTH_CACHING_SHA2_PASSWORD} {
		t.Run(plugin, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.AuthPlugin = plugin })
			if got := queryString(t, f.proxyDB(t, nil), "SELECT CURRENT_USER()"); !strings.HasPrefix(got, f.user+"@") {
				t.Errorf("current user %q", got)
			}
			// go-mysql's client starts with its own default plugin and
			// follows the proxy's switch request when they differ.
			c, err := client.Connect(f.px.addr, f.user, f.pw, f.db)
			if err != nil {
				t.Fatalf("go-mysql client: %v", err)
			}
			c.Close()
			for _, tc := range []struct{ user, pw string }{{f.user, "wrong"}, {"nobody", f.pw}, {f.user, ""}} {
				db := testdb.Open(t, testdb.DSN(f.px.addr, tc.user, tc.pw, f.db, nil))
				err := db.Ping()
				me := myErr(t, err)
				if me.Number != 1045 || string(me.SQLState[:]) != "28000" || !strings.Contains(me.Message, "Access denied for user '"+tc.user+"'") {
					t.Errorf("%s/%q: got %v (%s)", tc.user, tc.pw, me, me.SQLState)
				}
			}
		})
	}
}

func TestBackendRefusesUser(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	// The proxy knows the user, the backend does not: the backend's own
	// error reaches the client.
	px := startProxy(t, be.Addr, []User{{Name: "ghost", Password: "boo"}}, nil, nil)
	err := testdb.Open(t, testdb.DSN(px.addr, "ghost", "boo", db, nil)).Ping()
	// MariaDB fails an unknown user as if it were one of its accounts,
	// picked by a hash of the name among those that exist at the moment:
	// 1045, or 1698 when that account authenticates without a password
	// (unix_socket). Either way the words are the backend's.
	me := myErr(t, err)
	if (me.Number != 1045 && me.Number != 1698) || string(me.SQLState[:]) != "28000" ||
		!strings.Contains(me.Message, "Access denied for user 'ghost'") {
		t.Errorf("got %v (%s)", me, me.SQLState)
	}
}

func TestTooManyConnections(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConnections = 2 })
	var held []*sql.Conn
	db := f.proxyDB(t, nil)
	for i := 0; i < 2; i++ {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PingContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	other := f.proxyDB(t, nil)
	if me := myErr(t, other.Ping()); me.Number != 1040 {
		t.Errorf("got %v, want 1040", me)
	}
	held[0].Close()
	db.SetMaxIdleConns(0)
	// The freed slot is usable again.
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := other.Ping()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held[1].Close()
}

func TestPacketTooLarge(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPacketSize = 1 << 20 })
	db := f.proxyDB(t, nil)
	_, err := db.Exec("SELECT '" + strings.Repeat("x", 2<<20) + "'")
	if me := myErr(t, err); me.Number != 1153 {
		t.Errorf("got %v, want 1153", me)
	}
	// Other sessions (and new ones) are unaffected.
	if got := queryString(t, f.proxyDB(t, nil), "SELECT 'ok'"); got != "ok" {
		t.Fatal(got)
	}
}

func TestLargePacketsRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	db := f.proxyDB(t, nil)
	mustExec(t, db, "CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)")
	blob := make([]byte, 20<<20) // crosses the 16 MB packet boundary both ways
	rand.Read(blob)
	if _, err := db.Exec("INSERT INTO big VALUES (1, ?)", blob); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := db.QueryRow("SELECT b FROM big WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(blob) {
		t.Fatalf("blob differs: %d bytes back, want %d", len(got), len(blob))
	}
}

func TestGarbageDoesNotHurtOthers(t *testing.T) {
	f := newFixture(t, nil)
	good := f.proxyDB(t, nil)
	good.SetMaxOpenConns(1)
	if err := good.Ping(); err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0xff, 0xff, 0xff, 0x01, 0x00},
		{0x05, 0x00, 0x00, 0x01, 0x01, 0x02},
		make([]byte, 300),
	}
	for _, in := range inputs {
		c, err := net.Dial("tcp", f.px.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 512)
		if _, err := c.Read(buf); err != nil { // greeting
			t.Fatal(err)
		}
		c.Write(in)
		// The proxy answers with an error or closes; it must not hang.
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		c.Close()
	}
	if got := queryString(t, good, "SELECT 'still here'"); got != "still here" {
		t.Fatal(got)
	}
}

func TestClientVanishesMidResult(t *testing.T) {
	f := newFixture(t, nil)
	c, err := client.Connect(f.px.addr, f.user, f.pw, f.db)
	if err != nil {
		t.Fatal(err)
	}
	// Ask for a large result and hang up after the first packet.
	q := "SELECT REPEAT('x', 1000) FROM information_schema.columns a, information_schema.columns b LIMIT 200000"
	c.ResetSequence()
	if err := c.WritePacket(append([]byte{0, 0, 0, 0, gomysql.COM_QUERY}, q...)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	db := f.proxyDB(t, nil)
	if got := queryString(t, db, "SELECT 'fine'"); got != "fine" {
		t.Fatal(got)
	}
}

// backendAsker runs a query on the session's backend connection before
// every statement and refuses the statement with the error the query got,
// as the cache plugin does when the BEGIN it owes the backend fails.
type backendAsker struct{ query string }

func (backendAsker) Name() string { return "asker" }

func (a backendAsker) OnStatement(st *plugins.Statement) plugins.Action {
	_, err := st.Backend.Query(a.query)
	if err == nil {
		return plugins.Continue
	}
	var me *gomysql.MyError
	if !errors.As(err, &me) {
		me = gomysql.NewError(gomysql.ER_UNKNOWN_ERROR, err.Error())
	}
	return plugins.RefuseWith(me)
}

// TestPluginLosingTheBackendEndsTheSession: when a plugin's own query finds
// the backend connection gone, the client loses its connection as it would
// have directly, whatever the plugin refused the statement with.
func TestPluginLosingTheBackendEndsTheSession(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	link := newFaultyLink(t, be.Addr)
	px := startProxy(t, link.addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(backendAsker{"DO 1"}))
	live := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, nil))
	live.SetMaxOpenConns(1)
	if _, err := live.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	link.down()
	if _, err := live.Exec("SELECT 1"); !testdb.ConnectionLost(err) {
		t.Errorf("got %v, want the connection closed (as a dead backend closes it)", err)
	}
}

// TestPluginQueryErrorKeepsTheSession: a server error on a plugin's query,
// even one that ends a result set part way (which go-mysql returns
// wrapped), is the statement's error, not a lost connection.
func TestPluginQueryErrorKeepsTheSession(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	// Error 1242 comes with the second row, after the column definitions.
	asker := backendAsker{"SELECT (SELECT x FROM (SELECT 1 x UNION ALL SELECT 2) u WHERE u.x >= t.y) " +
		"FROM (SELECT 2 y UNION ALL SELECT 1) t"}
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(asker))
	live := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, nil))
	live.SetMaxOpenConns(1)
	for range 2 {
		if _, err := live.Exec("SELECT 1"); myErr(t, err).Number != gomysql.ER_SUBQUERY_NO_1_ROW {
			t.Fatalf("got %v, want error 1242 from the plugin's query", err)
		}
	}
}

func TestKeepsRefusedChange(t *testing.T) {
	for v, want := range map[string]bool{"5.5.5-10.11.19-MariaDB-0+deb12u1": true, "11.4.2-MariaDB": true, "8.0.36": false, "8.4.0-commercial": false} {
		if got := keepsRefusedChange(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// TestStoppedBackendDoesNotHangANewSession: a backend that stops answering
// (SIGSTOP, a hung host) while the pool holds a connection to it: a new
// session gets error 1429 within the connect timeout instead of waiting
// for the pooled connection's ping forever.
func TestStoppedBackendDoesNotHangANewSession(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	link := newFaultyLink(t, be.Addr)
	px := startProxy(t, link.addr, []User{{Name: user, Password: "pw"}}, func(c *Config) {
		c.Backend.ConnectTimeout = 500 * time.Millisecond
	}, nil)
	dsn := testdb.DSN(px.addr, user, "pw", db, nil)
	first := testdb.Open(t, dsn)
	if err := first.Ping(); err != nil {
		t.Fatal(err)
	}
	first.Close() // its backend connection goes to the pool
	waitFor(t, func() bool {
		px.srv.pool.mu.Lock()
		defer px.srv.pool.mu.Unlock()
		return px.srv.pool.nIdle == 1
	})
	link.stall()
	defer link.resume()
	pinged := make(chan error, 1)
	start := time.Now()
	go func() { pinged <- testdb.Open(t, dsn).Ping() }()
	select {
	case err := <-pinged:
		if me := myErr(t, err); me.Number != gomysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE {
			t.Errorf("got %v, want 1429", me)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v with a 500 ms connect timeout", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a new session waited 10 s for a stopped backend")
	}
}

func TestBackendDownAndBack(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	link := newFaultyLink(t, be.Addr)
	px := startProxy(t, link.addr, []User{{Name: user, Password: "pw"}}, nil, nil)
	dsn := testdb.DSN(px.addr, user, "pw", db, nil)

	live := testdb.Open(t, dsn)
	live.SetMaxOpenConns(1)
	if err := live.Ping(); err != nil {
		t.Fatal(err)
	}

	link.down() // the backend dies
	start := time.Now()
	_, err := live.Exec("SELECT 1")
	if !testdb.ConnectionLost(err) {
		t.Errorf("in-flight session: got %v, want its connection closed (as a dead backend closes it)", err)
	}
	fresh := testdb.Open(t, dsn)
	if me := myErr(t, fresh.Ping()); me.Number != gomysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE {
		t.Errorf("new session: got %v, want 1429", me)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("errors took %v; want prompt", d)
	}

	link.up(t) // the backend is back
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := fresh.Ping()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not recover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The old handle reconnects (its connection was closed by the proxy).
	if got := queryString(t, live, "SELECT 'back'"); got != "back" {
		t.Fatal(got)
	}
}

func TestKillUsesClientVisibleID(t *testing.T) {
	f := newFixture(t, nil)
	victim, err := client.Connect(f.px.addr, f.user, f.pw, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	id := victim.GetConnectionID()
	if id < proxyIDBase {
		t.Fatalf("handshake id %d is not a proxy id", id)
	}
	killer := f.proxyDB(t, nil)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := victim.Execute("SELECT SLEEP(30)")
		done <- err
	}()
	// KILL QUERY: wait until the sleep is running, then kill it.
	waitFor(t, func() bool {
		return queryString(t, killer, "SELECT COUNT(*) FROM information_schema.processlist WHERE info = 'SELECT SLEEP(30)'") == "1"
	})
	mustExec(t, killer, fmt.Sprintf("KILL QUERY %d", id))
	select {
	case err := <-done:
		// MariaDB reports an interrupted SLEEP() as a result of 1, not an
		// error; either way it must end now, not in 30 s.
		if err != nil {
			var me *gomysql.MyError
			if !errors.As(err, &me) || me.Code != 1317 {
				t.Errorf("victim got %v", err)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KILL QUERY did not reach the victim's backend thread")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("too slow")
	}
	// The victim's connection survives KILL QUERY.
	if _, err := victim.Execute("SELECT 1"); err != nil {
		t.Fatalf("victim after KILL QUERY: %v", err)
	}
	// KILL CONNECTION ends it.
	mustExec(t, killer, fmt.Sprintf("KILL %d", id))
	waitFor(t, func() bool {
		_, err := victim.Execute("SELECT 1")
		return err != nil
	})
	// Unknown proxy ids get the server's error.
	_, err = killer.Exec(fmt.Sprintf("KILL %d", proxyIDBase+999999))
	if me := myErr(t, err); me.Number != 1094 {
		t.Errorf("got %v, want 1094", me)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGracefulShutdown(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ShutdownTimeout = 3 * time.Second })
	db := f.proxyDB(t, nil)
	mustExec(t, db, "CREATE TABLE s (a INT)")
	idle := f.proxyDB(t, nil)
	if err := idle.Ping(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO s VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	start := time.Now()
	go func() { shut <- f.px.srv.Shutdown(ctx) }()
	// New clients are refused at once.
	waitFor(t, func() bool {
		c, err := net.DialTimeout("tcp", f.px.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	// The open transaction may still finish.
	if _, err := tx.Exec("INSERT INTO s VALUES (2)"); err != nil {
		t.Fatalf("statement in open transaction during shutdown: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit during shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown waited %v after the last transaction ended", d)
	}
	direct := testdb.Open(t, f.directDSN(nil))
	if got := queryString(t, direct, "SELECT COUNT(*) FROM s"); got != "2" {
		t.Errorf("committed rows: %s", got)
	}
}

// TestShutdownTimeoutBoundsALongStatement: a statement still running in the
// backend when the shutdown timeout passes does not hold the shutdown: its
// session ends, and Shutdown returns.
func TestShutdownTimeoutBoundsALongStatement(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ShutdownTimeout = 300 * time.Millisecond })
	db := f.proxyDB(t, nil)
	var backendID int64
	if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&backendID); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	slept := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT SLEEP(30)")
		slept <- err
	}()
	direct := testdb.Open(t, f.directDSN(nil))
	waitFor(t, func() bool {
		return queryString(t, direct, fmt.Sprintf("SELECT COUNT(*) FROM information_schema.processlist WHERE id = %d AND info LIKE 'SELECT SLEEP%%'", backendID)) == "1"
	})
	start := time.Now()
	if err := f.px.srv.Shutdown(context.Background()); err == nil {
		t.Error("shutdown with a statement still running: no error, want the timeout's")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v with a 300 ms timeout", d)
	}
	if err := <-slept; err == nil {
		t.Error("the cut-off statement succeeded")
	}
	// The backend thread is not left to sleep for the client.
	_, _ = direct.Exec(fmt.Sprintf("KILL %d", backendID))
}

func TestClientTLS(t *testing.T) {
	cert := selfSigned(t)
	f := newFixture(t, func(c *Config) {
		c.ClientTLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		c.RequireTLS = true
	})
	mysql.RegisterTLSConfig("tp-test", &tls.Config{InsecureSkipVerify: true})
	db := f.proxyDB(t, map[string]string{"tls": "tp-test"})
	if got := queryString(t, db, "SELECT 'secure'"); got != "secure" {
		t.Fatal(got)
	}
	plain := f.proxyDB(t, nil)
	if me := myErr(t, plain.Ping()); me.Number != 1045 {
		t.Errorf("plain client with require_tls: got %v", me)
	}
}

func selfSigned(t testing.TB) tls.Certificate {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tableproxy-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestConcurrentSessions(t *testing.T) {
	f := newFixture(t, nil)
	db := f.proxyDB(t, nil)
	db.SetMaxOpenConns(16)
	mustExec(t, db, "CREATE TABLE c (id INT PRIMARY KEY, v INT)")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := w*1000 + i
				if _, err := db.Exec("INSERT INTO c VALUES (?, ?)", id, i); err != nil {
					errs <- err
					return
				}
				var v int
				if err := db.QueryRow("SELECT v FROM c WHERE id = ?", id).Scan(&v); err != nil || v != i {
					errs <- fmt.Errorf("read back %d: %v %v", id, v, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := queryString(t, db, "SELECT COUNT(*) FROM c"); got != "800" {
		t.Errorf("rows %s", got)
	}
}

func TestBackendTLS(t *testing.T) {
	be := testdb.Get(t)
	caFile := os.Getenv("TABLEPROXY_TEST_BACKEND_CA")
	if caFile == "" {
		if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
			t.Fatal("TABLEPROXY_TEST_BACKEND_CA not set (scripts/mariadb.sh writes it)")
		}
		t.Skip("TABLEPROXY_TEST_BACKEND_CA not set")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in", caFile)
	}
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	host, _, _ := net.SplitHostPort(be.Addr)
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, func(c *Config) {
		c.Backend.TLS = &tls.Config{RootCAs: roots, ServerName: host}
	}, nil)
	conn := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, nil))
	var name, cipher string
	if err := conn.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Fatal("backend connection is not encrypted")
	}
	// A backend whose certificate the proxy cannot verify is refused.
	other := x509.NewCertPool()
	other.AddCert(mustParse(t, selfSigned(t).Certificate[0]))
	px2 := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, func(c *Config) {
		c.Backend.TLS = &tls.Config{RootCAs: other, ServerName: host}
	}, nil)
	if me := myErr(t, testdb.Open(t, testdb.DSN(px2.addr, user, "pw", db, nil)).Ping()); me.Number != gomysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE {
		t.Errorf("unverifiable backend: got %v, want 1429", me)
	}
}

func mustParse(t testing.TB, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOutOfMemoryRefusesNewClients: while the proxy is past its memory
// limit (memlimit.Watcher.Over), a new client gets 1041 (HY000), the
// backend's out-of-memory error, and the sessions there are go on; after,
// clients are taken again.
func TestOutOfMemoryRefusesNewClients(t *testing.T) {
	var over atomic.Bool
	f := newFixture(t, func(c *Config) { c.OutOfMemory = over.Load })
	db := f.proxyDB(t, nil)
	held, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	over.Store(true)
	other := f.proxyDB(t, nil)
	if me := myErr(t, other.Ping()); me.Number != 1041 || string(me.SQLState[:]) != "HY000" {
		t.Errorf("got %v (%s), want 1041 (HY000)", me, me.SQLState)
	}
	var one int
	if err := held.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Errorf("a session that was there: %v", err)
	}
	over.Store(false)
	if err := other.Ping(); err != nil {
		t.Errorf("after: %v", err)
	}
}

// TestRefusedLoginsAreLogged: a refused login is logged at INFO with the
// client's address and the backend's words (which name the user); a flood
// of them is a line a second, saying how many were held back.
func TestRefusedLoginsAreLogged(t *testing.T) {
	var buf syncBuf
	f := newFixture(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	wrong := testdb.Open(t, testdb.DSN(f.px.addr, f.user, "not-the-password", f.db, nil))
	start := time.Now()
	for i := 0; i < 30; i++ {
		if me := myErr(t, wrong.Ping()); me.Number != 1045 {
			t.Fatalf("got %v, want 1045", me)
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := buf.String()
	n := strings.Count(log, `msg="login refused"`)
	if n == 0 || !strings.Contains(log, "client=127.0.0.1:") || !strings.Contains(log, "Access denied for user '"+f.user+"'") {
		t.Fatalf("no refused login logged with its client and user:\n%s", log)
	}
	if secs := int(time.Since(start)/time.Second) + 1; n > secs {
		t.Errorf("%d lines for 30 refused logins in %d s, want at most one a second", n, secs)
	}
	if !strings.Contains(log, "more_refused_since_last_line=") {
		t.Errorf("no line says how many were held back:\n%s", log)
	}
}

// syncBuf is a bytes.Buffer for concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
