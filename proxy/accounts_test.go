package proxy

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"testing"
	"time"

	"tableproxy/internal/testdb"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/packet"
)

// A connection opened before the accounts changed is not taken from the
// pool again.
func TestPoolDropsConnectionsOpenedBeforeAnAccountChange(t *testing.T) {
	bp := newBackendPool(BackendConfig{Addr: "127.0.0.1:1"})
	key := poolKey{user: "u"}
	end, _ := net.Pipe()
	bc := &backendConn{Conn: &client.Conn{Conn: packet.NewConn(end)}, key: key, logins: bp.cfg.Logins.current(), idleSince: time.Now()}
	bp.idle[key] = []*backendConn{bc}
	bp.nIdle = 1
	if got := bp.takeIdle(key); got != bc {
		t.Fatal("a pooled connection was not reused before any change")
	}
	bp.idle[key] = []*backendConn{bc}
	bp.nIdle = 1
	bp.cfg.Logins.Changed()
	if got := bp.takeIdle(key); got != nil {
		t.Fatal("a connection logged in before the change was reused")
	}
}

// reap closes the stale connections of a key and keeps the others, and a
// timeout too short for a quarter of it still gives the reaper a ticker.
func TestPoolReapKeepsTheFreshConnectionsOfAKey(t *testing.T) {
	bp := newBackendPool(BackendConfig{Addr: "127.0.0.1:1", IdleTimeout: 3})
	if bp.reapEvery() <= 0 {
		t.Fatalf("reapEvery %v for a 3 ns timeout", bp.reapEvery())
	}
	bp.cfg.IdleTimeout = time.Minute
	key := poolKey{user: "u"}
	now := time.Now()
	conn := func(idle time.Duration) *backendConn {
		end, _ := net.Pipe()
		return &backendConn{Conn: &client.Conn{Conn: packet.NewConn(end)}, key: key, idleSince: now.Add(-idle)}
	}
	old, fresh, older := conn(2*time.Minute), conn(time.Second), conn(3*time.Minute)
	bp.idle[key] = []*backendConn{old, fresh, older}
	bp.nIdle = 3
	if n := bp.reap(now); n != 2 {
		t.Fatalf("reap closed %d, want 2", n)
	}
	if bp.nIdle != 1 || len(bp.idle[key]) != 1 || bp.idle[key][0] != fresh {
		t.Fatalf("kept %d (%v), want only the fresh one", bp.nIdle, bp.idle[key])
	}
	if got := bp.takeIdle(key); got != fresh {
		t.Fatal("the fresh connection was not handed out")
	}
}

// The pool closes connections that idled past IdleTimeout, and those opened
// before an account change, without waiting for a session to ask for them:
// their backend threads go.
func TestPoolReapsIdleAndStaleConnections(t *testing.T) {
	const idle = 600 * time.Millisecond
	f := newFixture(t, func(c *Config) { c.Backend.IdleTimeout = idle })
	direct := testdb.Open(t, f.directDSN(nil))
	onBackend := func() int {
		n, _ := strconv.Atoi(queryString(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()", f.user))
		return n
	}
	pooled := func() int {
		f.px.srv.pool.mu.Lock()
		defer f.px.srv.pool.mu.Unlock()
		return f.px.srv.pool.nIdle
	}
	waitFor := func(what string, cond func() bool, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > within {
				t.Fatalf("%s: not within %v (pooled %d, on the backend %d)", what, within, pooled(), onBackend())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	// open runs n sessions at once through the proxy and ends them, so that
	// their backend connections are pooled.
	open := func(n int) {
		db := f.proxyDB(t, nil)
		db.SetMaxIdleConns(0)
		ctx := context.Background()
		var conns []*sql.Conn
		for range n {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			queryString(t, c, "SELECT COUNT(*) FROM information_schema.SCHEMATA") // on the backend
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		db.Close()
		waitFor("pooling", func() bool { return pooled() == n && onBackend() == n }, 5*time.Second)
	}

	open(3)
	f.px.srv.pool.cfg.Logins.Changed()
	waitFor("closing after an account change", func() bool { return pooled() == 0 && onBackend() == 0 }, idle/2)

	open(2)
	took := waitFor("closing after the idle timeout", func() bool { return pooled() == 0 && onBackend() == 0 }, 5*idle)
	if took < idle/2 {
		t.Fatalf("closed after %v, before the idle timeout (%v)", took, idle)
	}
}

// A connection whose session ended as the server shut down is reset in the
// background; if that ends after the pool was closed, it is closed too, not
// left pooled with nobody to close it.
func TestPoolClosedAtShutdownPoolsNothingMore(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	bp := newBackendPool(BackendConfig{Addr: be.Addr})
	bc, err := bp.get(context.Background(), &backendParams{user: user, password: "pw", db: db, collation: 45})
	if err != nil {
		t.Fatal(err)
	}
	bp.closeIdle()
	bp.resetAndPool(bc) // what release starts in the background
	bp.mu.Lock()
	n := bp.nIdle
	bp.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections pooled after closeIdle, want 0", n)
	}
	if _, err := bc.Execute("SELECT 1"); err == nil {
		t.Error("the connection still answers: it was not closed")
	}
}
