package proxy

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// testProxy is an in-process proxy in front of the test backend.
type testProxy struct {
	srv  *Server
	addr string
	done chan error
}

// startProxy starts a proxy with the given users in front of backendAddr.
// mutate may adjust the config before the server is built.
func startProxy(t testing.TB, backendAddr string, users []User, mutate func(*Config), chain *plugins.Chain) *testProxy {
	t.Helper()
	cfg := Config{
		Listen:  "127.0.0.1:0",
		Backend: BackendConfig{Addr: backendAddr, ConnectTimeout: 2 * time.Second},
		Users:   map[string]User{},
		Logger:  slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, u := range users {
		cfg.Users[u.Name] = u
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, chain)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{srv: srv, addr: srv.Addr().String(), done: make(chan error, 1)}
	go func() { tp.done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-tp.done
	})
	return tp
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// fixture is a backend database with a user, and a proxy that accepts it.
type fixture struct {
	be   testdb.Backend
	db   string
	user string
	pw   string
	px   *testProxy
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	pw := "pw-" + t.Name()
	if len(pw) > 30 {
		pw = pw[:30]
	}
	user := be.NewUser(t, pw, "ALL", db)
	px := startProxy(t, be.Addr, []User{{Name: user, Password: pw}}, mutate, nil)
	return &fixture{be: be, db: db, user: user, pw: pw, px: px}
}

func (f *fixture) proxyDSN(params map[string]string) string {
	return testdb.DSN(f.px.addr, f.user, f.pw, f.db, params)
}

func (f *fixture) directDSN(params map[string]string) string {
	return testdb.DSN(f.be.Addr, f.user, f.pw, f.db, params)
}

func (f *fixture) proxyDB(t testing.TB, params map[string]string) *sql.DB {
	return testdb.Open(t, f.proxyDSN(params))
}

func myErr(t testing.TB, err error) *mysql.MySQLError {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("want a MySQL error, got %v", err)
	}
	return me
}

func TestMain(m *testing.M) {
	mysql.SetLogger(log0{})
	os.Exit(m.Run())
}

// log0 silences the driver's own logging of connection errors that tests
// provoke on purpose.
type log0 struct{}

func (log0) Print(...any) {}

func mustExec(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func queryString(t testing.TB, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, q string, args ...any) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s.String
}

// faultyLink is a TCP relay between the proxy and the backend that a test
// can cut (every connection drops, as when the backend dies) and restore.
type faultyLink struct {
	target  string
	mu      sync.Mutex
	ln      net.Listener
	addr    string
	conns   []net.Conn
	stalled atomic.Bool // bytes are held, as by a backend that is stopped (SIGSTOP)
}

func newFaultyLink(t testing.TB, target string) *faultyLink {
	l := &faultyLink{target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.addr = ln.Addr().String()
	l.serve(ln)
	t.Cleanup(l.down)
	return l
}

func (l *faultyLink) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", l.target)
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, b)
			l.mu.Unlock()
			go func() { l.copy(b, c); b.Close(); c.Close() }()
			go func() { l.copy(c, b); b.Close(); c.Close() }()
		}
	}()
}

// copy relays src to dst, holding what it read while the link is stalled.
func (l *faultyLink) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for l.stalled.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stall holds every byte from now on, until resume: the backend neither
// answers nor closes, as when it is stopped.
func (l *faultyLink) stall()  { l.stalled.Store(true) }
func (l *faultyLink) resume() { l.stalled.Store(false) }

// down stops listening and drops every relayed connection.
func (l *faultyLink) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// up listens again on the same address.
func (l *faultyLink) up(t testing.TB) {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", l.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	l.serve(ln)
}
