package e2e

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// startPrivateMariaDB starts a MariaDB of the test's own (see
// testdb.Private) on a port handed out as the proxies' are.
func startPrivateMariaDB(t *testing.T) *testdb.Private {
	t.Helper()
	return startPrivateMariaDBWithID(t, "")
}

// startPrivateMariaDBWithID starts one with the given server id, as a
// replica of the shared backend needs.
func startPrivateMariaDBWithID(t *testing.T, serverID string) *testdb.Private {
	t.Helper()
	_, port, _ := strings.Cut(freePort(t), ":")
	return testdb.StartPrivate(t, port, serverID)
}

// faultEnv is a private MariaDB with a database and user, and a proxy in
// front of it; it returns the backend and the proxied DSN.
func faultEnv(t *testing.T) (*testdb.Private, string) {
	m, dsn, _ := faultEnvCLI(t)
	return m, dsn
}

// faultEnvCLI is faultEnv, plus a function that runs a script through the
// mariadb client connected to the proxy.
func faultEnvCLI(t *testing.T) (*testdb.Private, string, func(script string) cliResult) {
	t.Helper()
	m := startPrivateMariaDB(t)
	be := testdb.Backend{Addr: m.Addr(), RootUser: "tproot", RootPassword: "tproot"}
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	px := startProxy(t, m.Addr(), account{user, "pw"})
	cli := func(script string) cliResult {
		t.Helper()
		path := requireTool(t, "mariadb", "mariadb-client")
		return runCLI(t, path, endpoint{"proxy", px.addr}, account{user, "pw"}, db, []byte(script), nil)
	}
	return m, testdb.DSN(px.addr, user, "pw", db, nil), cli
}

func mysqlErrNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// TestBackendKilledAndRestarted: kill -9 the backend under live sessions,
// then start it again. Clients get prompt MySQL errors, never a hang, and
// the proxy serves again as soon as the backend is back.
func TestBackendKilledAndRestarted(t *testing.T) {
	m, dsn, cli := faultEnvCLI(t)

	live := testdb.Open(t, dsn)
	live.SetMaxOpenConns(1)
	if _, err := live.Exec("CREATE TABLE k (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Exec("INSERT INTO k VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	m.Signal(t, syscall.SIGKILL)
	start := time.Now()
	if _, err := live.Exec("INSERT INTO k VALUES (2)"); !testdb.ConnectionLost(err) {
		t.Errorf("statement on a session whose backend died: %v, want its connection closed", err)
	}
	fresh := testdb.Open(t, dsn)
	if err := fresh.Ping(); mysqlErrNumber(err) != 1429 {
		t.Errorf("new session while the backend is down: %v, want error 1429", err)
	}
	// The mariadb client reads that error as one: a client-range number
	// there would be a malformed packet to it (error 2027).
	if r := cli("SELECT 1;\n"); !strings.Contains(r.stderr, "ERROR 1429 (HY000): Can't connect to the backend MySQL server on ") {
		t.Errorf("mariadb client while the backend is down: exit %d, %q; want error 1429", r.code, r.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("errors took %v", d)
	}

	m.Script(t, "start") // crash recovery, same datadir
	waitFor(t, 60*time.Second, "the proxy to serve again", func() (bool, error) {
		err := fresh.Ping()
		return err == nil, err
	})
	var n int
	if err := live.QueryRow("SELECT COUNT(*) FROM k").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restart: %d rows, %v (the acknowledged row must be there, the failed one not)", n, err)
	}
}

// TestBackendStopped: a backend that accepts connections but never answers
// (SIGSTOP) must not hang new clients past the connect timeout, and once it
// continues, everything proceeds.
func TestBackendStopped(t *testing.T) {
	m, dsn := faultEnv(t)
	if err := testdb.Open(t, dsn).Ping(); err != nil {
		t.Fatal(err)
	}

	m.Signal(t, syscall.SIGSTOP)
	continued := false
	defer func() {
		if !continued {
			m.Signal(t, syscall.SIGCONT)
		}
	}()
	start := time.Now()
	err := testdb.Open(t, dsn).Ping()
	// The default connect timeout is 5 s; the driver's own dial timeout in
	// testdb.DSN is also 5 s but only covers the TCP connect to the proxy,
	// which succeeds at once.
	if mysqlErrNumber(err) != 1429 {
		t.Errorf("new session against a stopped backend: %v, want error 1429", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v; want the connect timeout", d)
	}
	m.Signal(t, syscall.SIGCONT)
	continued = true
	waitFor(t, 30*time.Second, "the proxy to serve again", func() (bool, error) {
		err := testdb.Open(t, dsn).Ping()
		return err == nil, err
	})
}
