package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// privateMariaDB is a MariaDB of the test's own (scripts/mariadb.sh with
// its own run directory and port), which the test may kill and restart
// without disturbing the shared backend other tests use.
type privateMariaDB struct {
	runDir   string
	port     string
	serverID string // "" for the script's default, 1
}

func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	return startPrivateMariaDBWithID(t, "")
}

// startPrivateMariaDBWithID starts one with the given server id, as a
// replica of the shared backend needs.
func startPrivateMariaDBWithID(t *testing.T, serverID string) *privateMariaDB {
	t.Helper()
	testdb.Get(t) // same skip/fail rule as every backend test
	port := freePort(t)
	_, p, _ := strings.Cut(port, ":")
	m := &privateMariaDB{runDir: t.TempDir(), port: p, serverID: serverID}
	m.script(t, "start")
	t.Cleanup(func() { m.script(t, "stop") })
	return m
}

func (m *privateMariaDB) addr() string { return "127.0.0.1:" + m.port }

func (m *privateMariaDB) script(t *testing.T, verb string) {
	t.Helper()
	cmd := exec.Command("../scripts/mariadb.sh", verb)
	cmd.Env = append(os.Environ(), "TABLEPROXY_RUN_DIR="+m.runDir, "TABLEPROXY_MARIADB_PORT="+m.port)
	if m.serverID != "" {
		cmd.Env = append(cmd.Env, "TABLEPROXY_MARIADB_SERVER_ID="+m.serverID)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb.sh %s: %v\n%s", verb, err, out)
	}
}

func (m *privateMariaDB) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.runDir, "mariadb", "mariadb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func (m *privateMariaDB) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(m.pid(t), sig); err != nil {
		t.Fatal(err)
	}
}

// faultEnv is a private MariaDB with a database and user, and a proxy in
// front of it; it returns the backend and the proxied DSN.
func faultEnv(t *testing.T) (*privateMariaDB, string) {
	m, dsn, _ := faultEnvCLI(t)
	return m, dsn
}

// faultEnvCLI is faultEnv, plus a function that runs a script through the
// mariadb client connected to the proxy.
func faultEnvCLI(t *testing.T) (*privateMariaDB, string, func(script string) cliResult) {
	t.Helper()
	m := startPrivateMariaDB(t)
	be := testdb.Backend{Addr: m.addr(), RootUser: "tproot", RootPassword: "tproot"}
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	px := startProxy(t, m.addr(), account{user, "pw"})
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

	m.signal(t, syscall.SIGKILL)
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

	m.script(t, "start") // crash recovery, same datadir
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

	m.signal(t, syscall.SIGSTOP)
	continued := false
	defer func() {
		if !continued {
			m.signal(t, syscall.SIGCONT)
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
	m.signal(t, syscall.SIGCONT)
	continued = true
	waitFor(t, 30*time.Second, "the proxy to serve again", func() (bool, error) {
		err := testdb.Open(t, dsn).Ping()
		return err == nil, err
	})
}
