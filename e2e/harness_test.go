package e2e

import (
	"bytes"
	"database/sql"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// proxyBin is the tableproxy binary under test, set by TestMain.
var proxyBin string

// shutdownTimeout is the proxy's shutdown_timeout in these tests. A stopped
// proxy must exit within it; every test closes its clients first, so it
// normally exits at once.
const shutdownTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("TABLEPROXY_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: TABLEPROXY_BIN:", err)
			return 1
		}
		proxyBin = abs
		return m.Run()
	}
	if os.Getenv("TABLEPROXY_TEST_BACKEND") == "" && os.Getenv("TABLEPROXY_TEST_REQUIRE") != "1" {
		// Every test will skip for want of a backend; do not pay for a build.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "tableproxy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	proxyBin = filepath.Join(dir, "tableproxy")
	build := exec.Command("go", "build", "-o", proxyBin, "./cmd/tableproxy")
	build.Dir = ".." // the repository root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/tableproxy: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// account is a user name and password, the same on the proxy and the
// backend.
type account struct {
	name     string
	password string
}

// proxyProc is a running tableproxy subprocess.
type proxyProc struct {
	cfg    string // its config file (startProxyOpts)
	addr   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's result, valid after done
}

// startProxy runs tableproxy serve on a free loopback port in front of
// backendAddr, accepting users, and waits until it greets clients. The
// proxy is stopped with SIGTERM when the test ends; it must exit 0 within
// the shutdown timeout. Its stderr goes to the test log if the test failed.
func startProxy(t *testing.T, backendAddr string, users ...account) *proxyProc {
	t.Helper()
	return startProxyOpts(t, backendAddr, users, proxyOpts{})
}

// proxyOpts are the less common ways to start a proxy.
type proxyOpts struct {
	yaml    string    // more of the config file (e.g. a plugins section)
	admins  []account // admin users
	dataDir string    // the data directory; a fresh one when empty
	// defaults runs the proxy with its own default plugins when yaml has no
	// plugins section. Without it such a proxy gets `plugins: []`, so a
	// test states every feature it relies on.
	defaults bool
	flags    []string // more command-line flags
	env      []string // more environment, NAME=value
}

// hasPluginsSection reports whether a config fragment sets plugins (a
// top-level key at the start of a line).
func hasPluginsSection(yaml string) bool {
	for _, line := range strings.Split(yaml, "\n") {
		if strings.HasPrefix(line, "plugins:") {
			return true
		}
	}
	return false
}

// startProxyOpts is startProxy with options.
func startProxyOpts(t *testing.T, backendAddr string, users []account, o proxyOpts) *proxyProc {
	t.Helper()
	if proxyBin == "" {
		t.Fatal("no proxy binary (TestMain did not build one)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tableproxy.yaml")
	yaml := o.yaml
	if !o.defaults && !hasPluginsSection(yaml) {
		yaml = "plugins: []\n" + yaml
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("shutdown_timeout: %s\n%s", shutdownTimeout, yaml)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A port found free can be taken by another process before the proxy
	// binds it; only that failure is retried.
	for attempt := 1; ; attempt++ {
		dataDir := o.dataDir
		if dataDir == "" {
			dataDir = filepath.Join(dir, "data")
		}
		p := launchProxyEnv(t, o.env, cfg, dataDir, backendAddr, freePort(t), users, o.admins, o.flags...)
		err := p.waitReady(15 * time.Second)
		if err == nil {
			p.cfg = cfg
			t.Cleanup(func() { p.stop(t) })
			return p
		}
		_ = p.cmd.Process.Kill() // in case it is still running
		<-p.done
		if attempt < 3 && strings.Contains(p.stderr.String(), "address already in use") {
			continue
		}
		t.Fatalf("proxy did not start: %v\nstderr:\n%s", err, p.stderr.String())
	}
}

func launchProxy(t *testing.T, cfg, dataDir, backendAddr, addr string, users, admins []account, flags ...string) *proxyProc {
	t.Helper()
	return launchProxyEnv(t, nil, cfg, dataDir, backendAddr, addr, users, admins, flags...)
}

// launchProxyEnv is launchProxy with more environment (NAME=value).
func launchProxyEnv(t *testing.T, env []string, cfg, dataDir, backendAddr, addr string, users, admins []account, flags ...string) *proxyProc {
	t.Helper()
	args := []string{"serve", "--config", cfg, "--listen", addr, "--backend", backendAddr,
		"--data-dir", dataDir, "--log-level", "debug"}
	// Left to itself a node takes any free port for Raft, and the kernel may
	// hand it addr, which freePort has probed and closed but the proxy has
	// not bound yet: the proxy then fails to listen. Unless the
	// configuration names one, the Raft port is handed out here as well.
	if b, err := os.ReadFile(cfg); err != nil || !strings.Contains(string(b), "raft_listen:") {
		args = append(args, "--raft-listen", freePort(t))
	}
	for _, u := range users {
		args = append(args, "--user", u.name+":"+u.password)
	}
	for _, u := range admins {
		args = append(args, "--admin-user", u.name+":"+u.password)
	}
	args = append(args, flags...)
	p := &proxyProc{addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(proxyBin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout = p.stderr
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", proxyBin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// waitReady polls until the proxy sends a server greeting, it exits, or the
// timeout passes.
func (p *proxyProc) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("proxy exited during startup: %v", p.err)
		default:
		}
		err := readGreeting(p.addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no greeting from %s within %s: %v", p.addr, timeout, err)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readGreeting connects to addr and reads a protocol-10 handshake packet.
func readGreeting(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if n == 0 || body[0] != 10 {
		return fmt.Errorf("not a handshake packet: % x", body[:min(n, 16)])
	}
	return nil
}

// stop sends SIGTERM and checks that the proxy exits 0 within the shutdown
// timeout, and that it never logged a panic.
func (p *proxyProc) stop(t *testing.T) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("SIGTERM to proxy: %v", err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("proxy exited with %v after SIGTERM, want status 0", p.err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		// SIGQUIT makes the Go runtime print every goroutine's stack to
		// stderr (logged below) before it exits: where the shutdown hung.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		t.Errorf("proxy still running %s after SIGTERM (shutdown timeout %s); its goroutines are in its stderr", shutdownTimeout+5*time.Second, shutdownTimeout)
	}
	log := p.stderr.String()
	if strings.Contains(log, "DATA RACE") {
		t.Errorf("the proxy (built with -race) reported a data race")
	}
	for _, line := range strings.Split(log, "\n") {
		// (A failpoint's panic is one a test asked for; its stack is on its line.)
		if strings.Contains(line, "panic") && !strings.Contains(line, `panic="failpoint `) {
			t.Errorf("proxy logged a panic")
			break
		}
	}
	if t.Failed() {
		t.Logf("proxy stderr:\n%s", log)
	}
}

// freePort returns a loopback address free now, never one it returned
// before in this process: the listener is closed before the caller binds
// the port, so without that the kernel may hand the same port out twice
// (a node's Raft address and its MySQL address, once).
func freePort(t *testing.T) string {
	t.Helper()
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut[addr] {
			handedOut[addr] = true
			return addr
		}
	}
}

var (
	handedOutMu sync.Mutex
	handedOut   = map[string]bool{}
)

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// env is one test's world: a fresh database, backend users with all
// privileges on it, and a proxy that accepts those users.
type env struct {
	backend testdb.Backend
	db      string
	users   []account // users[0] is the main user
	proxy   *proxyProc
}

// endpoint is where a client connects: straight to the backend or through
// the proxy.
type endpoint struct {
	name string
	addr string
}

// newEnv sets up a database, nUsers users and a proxy. Cleanups run in
// reverse: clients the test opens later close first, then the proxy stops,
// then the users and the database are dropped.
func newEnv(t *testing.T, nUsers int) *env {
	t.Helper()
	b := testdb.Get(t)
	e := &env{backend: b, db: b.NewDatabase(t)}
	for i := 0; i < nUsers; i++ {
		pw := fmt.Sprintf("pw%d-%s", i, strings.ReplaceAll(t.Name(), "/", "-"))
		e.users = append(e.users, account{name: b.NewUser(t, pw, "ALL", e.db), password: pw})
	}
	e.proxy = startProxy(t, b.Addr, e.users...)
	return e
}

func (e *env) user() account { return e.users[0] }

func (e *env) direct() endpoint  { return endpoint{"direct", e.backend.Addr} }
func (e *env) proxied() endpoint { return endpoint{"proxy", e.proxy.addr} }

// endpoints is direct first, so that its result is the reference.
func (e *env) endpoints() []endpoint { return []endpoint{e.direct(), e.proxied()} }

// dsn is a go-sql-driver DSN for the main user at ep.
func (e *env) dsn(ep endpoint, params map[string]string) string {
	u := e.user()
	return testdb.DSN(ep.addr, u.name, u.password, e.db, params)
}

// open returns a database/sql handle for the main user at ep, closed when
// t ends.
func (e *env) open(t *testing.T, ep endpoint, params map[string]string) *sql.DB {
	t.Helper()
	db := testdb.Open(t, e.dsn(ep, params))
	if err := db.Ping(); err != nil {
		t.Fatalf("%s: connect: %v", ep.name, err)
	}
	return db
}

// exec runs statements directly on the backend as admin, in the test's
// database.
func (e *env) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for i, s := range stmts {
		stmts[i] = "USE `" + e.db + "`; " + s
	}
	e.backend.Exec(t, stmts...)
}

// requireTool returns the path of an external program, skipping the test
// when it is missing (failing it under TABLEPROXY_TEST_REQUIRE=1).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s not found (install the Debian package %s)", name, pkg)
	if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// waitFor polls cond every few milliseconds until it is true or timeout
// passes, and fails the test in the latter case.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// proxyRaces reports whether the proxy under test was built with -race
// (the race detector multiplies its memory and slows it several times:
// tests of resident memory, and long generated runs, are cut short).
func proxyRaces() bool {
	info, err := buildinfo.ReadFile(proxyBin)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
