package proxy

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tableproxy/internal/testdb"
)

// A client on the proxy's Unix socket is served like one on TCP, is taken
// as secure by tls.require (as MySQL takes its socket), is named
// 'user'@'localhost' in messages, and the socket file goes at shutdown.
func TestUnixSocketClients(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tp.sock")
	// Registered first, so it runs after the fixture's shutdown. (The lock
	// file stays, as mysqld's does.)
	t.Cleanup(func() {
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("socket file after shutdown: %v, want it removed", err)
		}
	})
	cert := selfSigned(t)
	f := newFixture(t, func(c *Config) {
		c.ListenSocket = sock
		c.ClientTLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		c.RequireTLS = true
	})
	if got := f.px.srv.SocketAddr(); got == nil || got.String() != sock {
		t.Fatalf("SocketAddr = %v, want %s", got, sock)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("socket file mode %v, want a socket with mode 0777", fi.Mode())
	}

	local := testdb.Open(t, testdb.DSN(sock, f.user, f.pw, f.db, nil))
	mustExec(t, local, "CREATE TABLE s (id INT PRIMARY KEY)")
	mustExec(t, local, "INSERT INTO s VALUES (1), (2)")
	if got := queryString(t, local, "SELECT COUNT(*) FROM s"); got != "2" {
		t.Errorf("count over the socket = %s, want 2", got)
	}
	if me := myErr(t, f.proxyDB(t, nil).Ping()); me.Number != 1045 {
		t.Errorf("plain TCP client with require_tls: got %v, want 1045", me)
	}

	wrong := testdb.Open(t, testdb.DSN(sock, f.user, "not-the-password", f.db, nil))
	me := myErr(t, wrong.Ping())
	want := "Access denied for user '" + f.user + "'@'localhost'"
	if me.Number != 1045 || !strings.Contains(me.Message, want) {
		t.Errorf("wrong password over the socket: %d %q, want 1045 with %q", me.Number, me.Message, want)
	}
}

// TestListenSocketReplacesOnlyAStaleFile: a socket file nobody accepts on is
// replaced; a live proxy's (by its lock), another server's (by a dial) and
// a file that is not a socket are refused and left as they are.
func TestListenSocketReplacesOnlyAStaleFile(t *testing.T) {
	dir := t.TempDir()

	// A socket file nobody accepts on, as a killed proxy leaves it.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	if _, err := os.Lstat(stale); err != nil {
		t.Fatalf("no stale socket to test with: %v", err)
	}
	ln, err = listenSocket(stale)
	if err != nil {
		t.Fatalf("stale socket file: %v, want it replaced", err)
	}
	c, err := net.Dial("unix", stale)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	_ = c.Close()

	// The same path while that proxy's listener is alive: its lock says so.
	if _, err := listenSocket(stale); err == nil || !strings.Contains(err.Error(), "another tableproxy holds") {
		t.Errorf("socket of a live proxy: %v, want 'another tableproxy holds'", err)
	}
	_ = ln.Close()
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("socket file after Close: %v, want it removed", err)
	}

	// A socket another kind of server accepts on (no lock of ours).
	other := filepath.Join(dir, "other.sock")
	oln, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer oln.Close()
	if _, err := listenSocket(other); err == nil || !strings.Contains(err.Error(), "another server is listening") {
		t.Errorf("live socket of another server: %v, want 'another server is listening'", err)
	}
	if c, err := net.Dial("unix", other); err != nil {
		t.Errorf("the other server's socket after the refusal: %v", err)
	} else {
		_ = c.Close()
	}

	// A file that is not a socket is never removed.
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenSocket(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file: %v, want 'not a socket'", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Errorf("regular file after the refusal: %q, %v", b, err)
	}
}

// TestAcceptCanRetry: running out of descriptors (a burst of clients) must
// not end the listeners; a closed listener must.
func TestAcceptCanRetry(t *testing.T) {
	for _, err := range []error{
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.ENFILE)},
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENOBUFS)},
	} {
		if !acceptCanRetry(err) {
			t.Errorf("%v: not retried", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
	if _, err := ln.Accept(); acceptCanRetry(err) {
		t.Errorf("accept on a closed listener (%v) retried", err)
	}
}
