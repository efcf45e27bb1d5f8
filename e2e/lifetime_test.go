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

// A client's connection through the proxy lives as long as its backend
// session, as a direct connection does: when the backend ends an idle
// session (wait_timeout, KILL), the client's connection closes, so that
// go-sql-driver's check of a pooled connection finds it dead and opens a
// new one instead of failing the next query with "invalid connection".
// And when the client goes away during a statement, the statement is
// killed instead of running on for nobody.

// lifetimeNotice is how long the proxy may take to notice that an idle
// session's backend connection closed: its sweeper arms the watcher of a
// session idle for a whole tick (250 ms), so at most two ticks, and some
// slack for a loaded machine.
const lifetimeNotice = time.Second

// openOneConn opens a pool that keeps one idle connection, with no idle
// time limit of its own, as applications commonly configure it.
func openOneConn(t *testing.T, e *env, ep endpoint, params map[string]string) *sql.DB {
	t.Helper()
	db := e.open(t, ep, params)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db
}

func connectionID(t *testing.T, ep endpoint, db *sql.DB) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatalf("%s: SELECT CONNECTION_ID(): %v", ep.name, err)
	}
	return id
}

// TestLifetimeIdlePastWaitTimeout: a session wait_timeout (set by the DSN)
// ends the idle session; the next query opens a new one without an error.
func TestLifetimeIdlePastWaitTimeout(t *testing.T) {
	e := newEnv(t, 1)
	for _, ep := range e.endpoints() {
		t.Run(ep.name, func(t *testing.T) {
			db := openOneConn(t, e, ep, map[string]string{"wait_timeout": "2"})
			first := connectionID(t, ep, db)
			if err := db.Ping(); err != nil {
				t.Fatalf("ping: %v", err)
			}
			time.Sleep(3 * time.Second)
			if again := connectionID(t, ep, db); again == first {
				t.Errorf("session %d still in use after idling past wait_timeout", first)
			}
		})
	}
}

// TestLifetimeMariaDBClientIdlePastWaitTimeout: the mariadb client idles
// past wait_timeout, then sends its next statement. MariaDB resets such a
// connection, so the client's write fails and it reports the server gone
// (2006, after which an interactive client reconnects and sends the
// statement again), not a connection lost during the query (2013): the
// same words through the proxy as directly.
func TestLifetimeMariaDBClientIdlePastWaitTimeout(t *testing.T) {
	e := newEnv(t, 1)
	cli := requireTool(t, "mariadb", "mariadb-client")
	script := []byte("SET SESSION wait_timeout = 2;\nSELECT 1;\n\\! sleep 3\nSELECT 2;\n")
	var outs [2]cliResult
	for i, ep := range e.endpoints() {
		// Without TLS on both (the backend offers it, this proxy does
		// not): over TLS the client words a closed socket differently.
		outs[i] = runCLI(t, cli, ep, e.user(), e.db, script, []string{"--skip-ssl"})
	}
	direct, proxied := outs[0], outs[1]
	if !strings.Contains(direct.stderr, "ERROR 2006 (HY000)") {
		t.Errorf("direct: %q, want the client's error 2006; the client or the backend changed", direct.stderr)
	}
	if proxied.stderr != direct.stderr || proxied.code != direct.code || proxied.stdout != direct.stdout {
		t.Errorf("through the proxy: exit %d, %q, %q; direct: exit %d, %q, %q",
			proxied.code, proxied.stdout, proxied.stderr, direct.code, direct.stdout, direct.stderr)
	}
}

// TestLifetimeIdleSessionKilled: root kills the idle session's backend
// thread; the client's next query runs on a new session, as directly.
func TestLifetimeIdleSessionKilled(t *testing.T) {
	e := newEnv(t, 1)
	root := e.backend.Root(t)
	for _, ep := range e.endpoints() {
		t.Run(ep.name, func(t *testing.T) {
			db := openOneConn(t, e, ep, nil)
			first := connectionID(t, ep, db)
			if _, err := root.Exec(fmt.Sprintf("KILL CONNECTION %d", first)); err != nil {
				t.Fatalf("KILL: %v", err)
			}
			time.Sleep(lifetimeNotice) // an application idle for a moment
			if again := connectionID(t, ep, db); again == first {
				t.Errorf("killed session %d still in use", first)
			}
		})
	}
}

// TestLifetimeClientGoneMidStatement: the client gives up on a long
// statement and closes its connection (go-sql-driver does on a cancelled
// context); the backend stops running it within about a second.
func TestLifetimeClientGoneMidStatement(t *testing.T) {
	e := newEnv(t, 1)
	root := e.backend.Root(t)
	ep := e.proxied()
	db := openOneConn(t, e, ep, nil)
	thread := connectionID(t, ep, db)
	const query = "SELECT SLEEP(29) /* client gone */"
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := db.ExecContext(ctx, query)
	if err == nil {
		t.Fatal("the statement finished before the client gave up")
	}
	gone := time.Now()
	running := func() (bool, error) {
		var n int
		err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND COMMAND = 'Query' AND INFO LIKE 'SELECT SLEEP(29)%'", thread).Scan(&n)
		return n > 0, err
	}
	waitFor(t, 10*time.Second, "the statement to stop", func() (bool, error) {
		r, err := running()
		return !r && err == nil, err
	})
	if took := time.Since(gone); took > 1500*time.Millisecond {
		t.Errorf("the statement ran on %s after its client went away", took.Round(time.Millisecond))
	}
}

// TestLifetimePooledBackendKilled: the backend ends a connection the proxy
// keeps in its pool; the next client gets a working session all the same.
func TestLifetimePooledBackendKilled(t *testing.T) {
	e := newEnv(t, 1)
	root := e.backend.Root(t)
	ep := e.proxied()
	db := openOneConn(t, e, ep, nil)
	first := connectionID(t, ep, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The proxy pools the connection after resetting it.
	waitFor(t, 5*time.Second, "the connection to be pooled", func() (bool, error) {
		var cmd string
		err := root.QueryRow("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = ?", first).Scan(&cmd)
		return err == nil && cmd == "Sleep", err
	})
	time.Sleep(100 * time.Millisecond)
	if _, err := root.Exec(fmt.Sprintf("KILL CONNECTION %d", first)); err != nil {
		t.Fatalf("KILL: %v", err)
	}
	time.Sleep(lifetimeNotice)
	if strings.Contains(e.proxy.stderr.String(), "panic") {
		t.Fatalf("proxy panicked:\n%s", e.proxy.stderr.String())
	}
	db = openOneConn(t, e, ep, nil)
	if again := connectionID(t, ep, db); again == first {
		t.Errorf("the killed connection %d was handed out again", first)
	}
}

// TestLifetimeBackendRestarted: the backend restarts (its own private
// instance) while a pool's connections idle; the next query opens a new
// session on the restarted backend without an error, as directly.
func TestLifetimeBackendRestarted(t *testing.T) {
	m := startPrivateMariaDB(t)
	be := testdb.Backend{Addr: m.Addr(), RootUser: "tproot", RootPassword: "tproot"}
	dbName := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", dbName)
	px := startProxy(t, m.Addr(), account{user, "pw"})
	pools := map[string]*sql.DB{}
	for _, ep := range []endpoint{{"direct", m.Addr()}, {"proxy", px.addr}} {
		db := testdb.Open(t, testdb.DSN(ep.addr, user, "pw", dbName, nil))
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		connectionID(t, ep, db)
		pools[ep.name] = db
	}
	m.Script(t, "stop")
	m.Script(t, "start")
	time.Sleep(lifetimeNotice)
	for name, db := range pools {
		if err := db.QueryRow("SELECT 1").Scan(new(int)); err != nil {
			t.Errorf("%s: first query after the backend restarted: %v", name, err)
		}
	}
}
