package e2e

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// defaultsEnv is a proxy started as docs/operations.md, "Running the proxy",
// starts it: --backend, --user and --admin-user, no plugins section.
type defaultsEnv struct {
	backend    testdb.Backend
	db         string
	app, admin account
}

// newDefaultsEnv makes the users; replication grants the admin (who reads the
// binary log by default) when asked.
func newDefaultsEnv(t *testing.T, replication bool) *defaultsEnv {
	b := testdb.Get(t)
	e := &defaultsEnv{backend: b, db: b.NewDatabase(t)}
	e.app = account{b.NewUser(t, "app-pw", "ALL", e.db), "app-pw"}
	e.admin = account{b.NewUser(t, "admin-pw", "ALL", e.db), "admin-pw"}
	if replication {
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", e.admin.name, host))
		}
	}
	b.Exec(t, "CREATE TABLE `"+e.db+"`.ref (id INT PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO `"+e.db+"`.ref VALUES (1, 'one'), (2, 'two'), (3, 'three')",
		"CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, a INT, b VARCHAR(20))",
		"INSERT INTO `"+e.db+"`.t SELECT seq, seq % 7, CONCAT('b', seq) FROM mysql.seq_1_to_2000")
	return e
}

func (e *defaultsEnv) start(t *testing.T, o proxyOpts) *proxyProc {
	o.admins = []account{e.admin}
	return startProxyOpts(t, e.backend.Addr, []account{e.app}, o)
}

func (e *defaultsEnv) open(t *testing.T, p *proxyProc, a account) *sql.DB {
	return testdb.Open(t, testdb.DSN(p.addr, a.name, a.password, e.db, nil))
}

// waitLogs waits for the proxy's log to hold every fragment.
func waitLogs(t *testing.T, p *proxyProc, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		waitLog(t, p, 15*time.Second, f)
	}
}

// With no plugins section the proxy runs the product: tables can be cached
// and are answered from memory, ADD INDEX runs as a job, and the log says so.
func TestDefaultsRunTheProduct(t *testing.T) {
	e := newDefaultsEnv(t, true)
	p := e.start(t, proxyOpts{defaults: true})
	waitLogs(t, p, "plugins=metrics,cache,ddloffload,digest",
		`"feature cached tables: on" binlog_user=`+e.admin.name,
		`"feature online ADD INDEX: on" binlog_user=`+e.admin.name,
		`"feature metrics: on, not served"`,
		`"feature query digests and cache advisor: on"`)

	admin := e.open(t, p, e.admin)
	if _, err := admin.Exec("ALTER TABLE ref CACHE"); err != nil {
		t.Fatalf("ALTER TABLE ref CACHE with the defaults: %v", err)
	}
	waitState(t, admin, "ref", "ready", 3, 1)
	app := e.open(t, p, e.app)
	for i := 0; i < 3; i++ {
		var name string
		if err := app.QueryRow("SELECT name FROM ref WHERE id = 2").Scan(&name); err != nil || name != "two" {
			t.Fatalf("cached read: %q %v", name, err)
		}
	}
	var hits int64
	if err := admin.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'ref'").Scan(&hits); err != nil || hits == 0 {
		t.Fatalf("reads of the cached table answered from memory: %d %v", hits, err)
	}

	if _, err := app.Exec("ALTER TABLE t ADD INDEX idx_a (a)"); err != nil {
		t.Fatalf("ADD INDEX with the defaults: %v", err)
	}
	j, err := lastJob(admin)
	if err != nil || j.Table != "t" || j.State != "done" || !strings.Contains(j.Query.String, "idx_a") {
		t.Fatalf("the ADD INDEX as a job: %+v %v", j, err)
	}
}

// `plugins: []` turns every plugin off, and --plugins overrides the list.
func TestPluginsNoneAndFlag(t *testing.T) {
	e := newDefaultsEnv(t, true)

	none := e.start(t, proxyOpts{yaml: "plugins: []\n"})
	waitLogs(t, none, `"feature cached tables: off"`, `"feature online ADD INDEX: off"`, `"feature metrics: off"`)
	_, err := e.open(t, none, e.admin).Exec("ALTER TABLE ref CACHE")
	wantError(t, err, 1064, "syntax") // the backend's own answer
	none.stop(t)

	flag := e.start(t, proxyOpts{yaml: "plugins: []\n", flags: []string{"--plugins", "cache"}})
	waitLogs(t, flag, "plugins=cache ", `"feature cached tables: on"`, `"feature online ADD INDEX: off"`)
	if _, err := e.open(t, flag, e.admin).Exec("ALTER TABLE ref CACHE"); err != nil {
		t.Fatalf("ALTER TABLE ref CACHE with --plugins cache: %v", err)
	}
}

// An admin without replication privileges: the proxy still starts, and the
// log says which features are limited and what to grant.
func TestDefaultsSayWhatToChange(t *testing.T) {
	e := newDefaultsEnv(t, false)
	p := e.start(t, proxyOpts{defaults: true})
	waitLogs(t, p, `"feature cached tables: limited: ALTER TABLE ... CACHE is refused`,
		`"feature online ADD INDEX: limited:`, "GRANT BINLOG MONITOR (MariaDB) or REPLICATION CLIENT (MySQL) ON *.* TO "+e.admin.name)

	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, fmt.Sprintf("GRANT BINLOG MONITOR ON *.* TO '%s'@'%s'", e.admin.name, host))
	}
	p.stop(t)
	p = e.start(t, proxyOpts{defaults: true})
	waitLogs(t, p, "GRANT REPLICATION SLAVE ON *.* TO "+e.admin.name)
}
