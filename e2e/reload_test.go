package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// TestReloadOnSIGHUP: SIGHUP re-reads the configuration file (and the
// command line) without a restart: a user's password and a new user take
// effect for the next logins, a removed user is refused while its open
// session goes on, a setting read only at start is
// named in one log line, and a file that does not load is refused whole,
// the running configuration staying.
func TestReloadOnSIGHUP(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	other := account{b.NewUser(t, "other-pw", "ALL", db), "other-pw"}
	p := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{yaml: fmt.Sprintf("users:\n  - {name: %s, password: not-its-password}\n", other.name)})
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(p.cfg, []byte(fmt.Sprintf("shutdown_timeout: %s\nplugins: []\n%s", shutdownTimeout, yaml)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hup := func(want string) {
		t.Helper()
		before := strings.Count(p.stderr.String(), want)
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the reload to be logged", func() (bool, error) {
			return strings.Count(p.stderr.String(), want) > before, nil
		})
	}
	login := func(a account) error {
		c := testdb.Open(t, testdb.DSN(p.addr, a.name, a.password, db, nil))
		defer c.Close()
		return c.Ping()
	}
	denied := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1045
	}
	if err := login(other); !denied(err) {
		t.Fatalf("%s with its password before the reload: %v, want 1045", other.name, err)
	}

	// Its password. (The log level is the harness's --log-level, which
	// a file does not override.)
	write(fmt.Sprintf("users:\n  - {name: %s, password: %s}\n", other.name, other.password))
	hup("config: reloaded")
	if err := login(other); err != nil {
		t.Fatalf("%s after the reload: %v", other.name, err)
	}
	if err := login(app); err != nil {
		t.Fatalf("%s (a --user flag) after the reload: %v", app.name, err)
	}
	open := testdb.Open(t, testdb.DSN(p.addr, other.name, other.password, db, nil))
	open.SetMaxOpenConns(1)
	if err := open.Ping(); err != nil {
		t.Fatal(err)
	}

	// A file that does not load: refused whole.
	write("users: [this is not\n")
	hup("config: reload refused")
	if err := login(other); err != nil {
		t.Fatalf("%s after a refused reload: %v", other.name, err)
	}

	// The user removed, and a setting read only at start.
	write("max_connections: 77\n")
	hup("config: reloaded")
	if err := login(other); !denied(err) {
		t.Fatalf("%s after it was removed: %v, want 1045", other.name, err)
	}
	if err := open.Ping(); err != nil {
		t.Errorf("%s's session open before it was removed: %v", other.name, err)
	}
	if !strings.Contains(p.stderr.String(), `need_restart=max_connections`) {
		t.Errorf("the log does not name max_connections as needing a restart:\n%s", p.stderr.String())
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("the proxy exited")
	}
}

// TestAdminReloadConfig: ADMIN RELOAD CONFIG reloads as SIGHUP does, for
// admins only, and says what it applied and what needs a restart, or why
// the file was refused.
func TestAdminReloadConfig(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	admin := account{b.NewUser(t, "admin-pw", "ALL", db), "admin-pw"}
	other := account{b.NewUser(t, "other-pw", "ALL", db), "other-pw"}
	p := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{admins: []account{admin}})
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(p.cfg, []byte(fmt.Sprintf("shutdown_timeout: %s\nplugins: []\n%s", shutdownTimeout, yaml)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	adminDB := testdb.Open(t, testdb.DSN(p.addr, admin.name, admin.password, db, nil))
	appDB := testdb.Open(t, testdb.DSN(p.addr, app.name, app.password, db, nil))
	if _, err := appDB.Exec("ADMIN RELOAD CONFIG"); err == nil || !strings.Contains(err.Error(), "1227") {
		t.Errorf("ADMIN RELOAD CONFIG by a user who is not an admin: %v, want 1227", err)
	}
	write(fmt.Sprintf("max_connections: 55\nusers:\n  - {name: %s, password: %s}\n", other.name, other.password))
	var applied, restart string
	if err := adminDB.QueryRow("ADMIN RELOAD CONFIG").Scan(&applied, &restart); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(applied, "users") || restart != "max_connections" {
		t.Errorf("applied %q, need_restart %q", applied, restart)
	}
	if err := testdb.Open(t, testdb.DSN(p.addr, other.name, other.password, db, nil)).Ping(); err != nil {
		t.Errorf("%s after ADMIN RELOAD CONFIG: %v", other.name, err)
	}
	write("users: [{name: x, password: y}, {name: x, password: z}]\n")
	if _, err := adminDB.Exec("ADMIN RELOAD CONFIG"); err == nil || !strings.Contains(err.Error(), "duplicate user") {
		t.Errorf("ADMIN RELOAD CONFIG of a bad file: %v, want its refusal", err)
	}
}

// TestDataDirInUse: a second proxy on a data directory a running one
// holds exits at once, naming the holder's pid, instead of waiting on its
// files.
func TestDataDirInUse(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	dataDir := t.TempDir()
	first := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{dataDir: dataDir})
	cfg := first.cfg
	second := launchProxy(t, cfg, dataDir, b.Addr, freePort(t), []account{app}, nil)
	select {
	case <-second.done:
	case <-time.After(10 * time.Second):
		_ = second.cmd.Process.Kill()
		<-second.done
		t.Fatalf("the second proxy did not exit:\n%s", second.stderr.String())
	}
	want := fmt.Sprintf("in use by another tableproxy (pid %d", first.cmd.Process.Pid)
	if second.err == nil || !strings.Contains(second.stderr.String(), want) {
		t.Errorf("the second proxy: %v, want an exit saying %q:\n%s", second.err, want, second.stderr.String())
	}
	if err := testdb.Open(t, testdb.DSN(first.addr, app.name, app.password, db, nil)).Ping(); err != nil {
		t.Errorf("the first proxy: %v", err)
	}
}

// TestLogsAreOneFormat: with log.format json every line the process
// writes is JSON, Raft's and go-mysql's included, and the leader is
// named at INFO.
func TestLogsAreOneFormat(t *testing.T) {
	e := newCacheEnvOpts(t, "")
	e.proxy.stop(t)
	e.yaml = "log: {format: json}\n" + e.yaml
	e.start(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY)", "INSERT INTO `"+e.db+"`.t VALUES (1)")
	cacheTables(t, e, map[string]int64{"t": 1})
	e.proxy.stop(t)
	var lines, raft int
	for _, line := range strings.Split(e.proxy.stderr.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines++
		if !json.Valid([]byte(line)) {
			t.Errorf("not JSON: %s", line)
		}
		if strings.Contains(line, `"msg":"raft: `) {
			raft++
		}
	}
	if !strings.Contains(e.proxy.stderr.String(), `"level":"INFO","msg":"cluster: this node leads"`) {
		t.Error("no INFO line names the leader")
	}
	t.Logf("%d lines, %d of Raft's, all JSON", lines, raft)
	if raft == 0 {
		t.Error("no line of Raft's (at debug level there are)")
	}
}

// TestCheckConfigOnline: check-config --online logs in to the backend as
// every configured user and checks the binary log as the binlog user,
// naming each problem with its fix; with none it exits 0.
func TestCheckConfigOnline(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	admin := account{b.NewUser(t, "admin-pw", "ALL", db), "admin-pw"}
	run := func(users ...string) (string, error) {
		args := []string{"check-config", "--online", "--backend", b.Addr}
		args = append(args, users...)
		out, err := exec.Command(proxyBin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := run("--user", app.name+":"+app.password, "--user", "nobody:x", "--admin-user", admin.name+":"+admin.password)
	if err == nil || !strings.Contains(out, "user "+app.name+": logs in") || !strings.Contains(out, "user nobody: the backend refuses it") ||
		!strings.Contains(out, "change: GRANT") {
		t.Errorf("a user the backend lacks, and a binlog user without replication rights: %v\n%s", err, out)
	}
	grantEverywhere(t, b, "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s", admin.name)
	out, err = run("--user", app.name+":"+app.password, "--admin-user", admin.name+":"+admin.password)
	if err != nil || !strings.Contains(out, "binary log (as "+admin.name+"): followed") {
		t.Errorf("all in order: %v\n%s", err, out)
	}
}
