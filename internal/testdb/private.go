package testdb

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Private is a MariaDB of the test's own (scripts/mariadb.sh with its own
// run directory and port), which the test may kill and restart without
// disturbing the shared backend other tests use. Its admin is the
// script's, tproot.
type Private struct {
	runDir   string
	port     string
	serverID string // "" for the script's default, 1
}

// StartPrivate starts one listening on 127.0.0.1 at port, with the given
// server id ("" for the script's default; a replica of the shared backend
// needs another), and stops it after the test.
func StartPrivate(t *testing.T, port, serverID string) *Private {
	t.Helper()
	Get(t) // same skip/fail rule as every backend test
	m := &Private{runDir: t.TempDir(), port: port, serverID: serverID}
	m.Script(t, "start")
	t.Cleanup(func() { m.Script(t, "stop") })
	return m
}

// Addr is its host:port.
func (m *Private) Addr() string { return "127.0.0.1:" + m.port }

// Backend is its address and admin account.
func (m *Private) Backend() Backend {
	return Backend{Addr: m.Addr(), RootUser: "tproot", RootPassword: "tproot"}
}

// Script runs scripts/mariadb.sh verb (start, stop) on it.
func (m *Private) Script(t *testing.T, verb string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "mariadb.sh"), verb)
	cmd.Env = append(os.Environ(), "TABLEPROXY_RUN_DIR="+m.runDir, "TABLEPROXY_MARIADB_PORT="+m.port)
	if m.serverID != "" {
		cmd.Env = append(cmd.Env, "TABLEPROXY_MARIADB_SERVER_ID="+m.serverID)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb.sh %s: %v\n%s", verb, err, out)
	}
}

// PID is its server process.
func (m *Private) PID(t *testing.T) int {
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

// Signal sends sig to its server process. After SIGKILL it returns once
// the process is gone: the kernel tears a large process down for a while,
// and until then its listening socket takes connections that nobody will
// answer, which is the stopped backend of another test, not a dead one.
func (m *Private) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	pid := m.PID(t)
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	if sig != syscall.SIGKILL {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for !exited(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd (pid %d) still there 30 s after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exited says whether pid has ended: gone, or a zombie nobody reaped yet
// (which holds no sockets any more).
func exited(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	// The state follows the command name, which is in parentheses.
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && (strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X"))
}

// repoRoot is the repository's root: this file is internal/testdb/private.go.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// StartReplica starts a replica of the shared backend (scripts/mariadb.sh
// replica start: a second instance under the backend's run directory,
// listening at port, replicating with GTID) from the backend's current
// position, applying only the tables that match doTable (a
// replicate_wild_do_table pattern such as 'tp_mytest%.%'), so that it does
// not replay what other tests wrote; it is stopped after the test. The
// shared backend must be the script's own instance.
func StartReplica(t *testing.T, port, doTable string) *Private {
	t.Helper()
	b := Get(t)
	_, primaryPort, _ := strings.Cut(b.Addr, ":")
	runDir := os.Getenv("TABLEPROXY_RUN_DIR")
	if runDir == "" {
		runDir = filepath.Join(repoRoot(), ".run")
	}
	m := &Private{runDir: filepath.Join(runDir, "replica"), port: port}
	run := func(verb string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "mariadb.sh"), "replica", verb)
		cmd.Env = append(os.Environ(), "TABLEPROXY_RUN_DIR="+runDir, "TABLEPROXY_MARIADB_PORT="+primaryPort,
			"TABLEPROXY_MARIADB_REPLICA_PORT="+port, "TABLEPROXY_MARIADB_REPLICA_FROM=now", "TABLEPROXY_MARIADB_REPLICA_DO_TABLE="+doTable)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mariadb.sh replica %s: %v\n%s", verb, err, out)
		}
	}
	run("start")
	t.Cleanup(func() { run("stop") })
	return m
}
