package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// TestStalledBinlogStream: when the binary-log stream stops delivering
// without breaking, the proxy stops answering cached reads from memory
// within about a second (the backend sends a heartbeat every 250 ms), so
// writes that bypass it are seen; once the stream moves again, reads come
// from memory again.
func TestStalledBinlogStream(t *testing.T) {
	e, admin := newStallEnv(t)
	b := e.backend
	app := e.open(t, e.app)
	read := func() int64 {
		var v int64
		if err := app.QueryRow("SELECT v FROM st WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	direct := testdb.Open(t, testdb.DSN(b.Addr, e.app.name, e.app.password, e.db, nil))
	lastStale := lastStaleUnderStall(t, direct, "st", read)
	if lastStale > 1500*time.Millisecond {
		t.Errorf("with the stream stalled, a write bypassing the proxy was still unseen %v after the stall began", lastStale)
	}
	stalled.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		hits := memoryHits(t, admin, "st")
		if v := read(); v != 25 {
			t.Fatalf("after the stall: v = %d, want 25", v)
		}
		if memoryHits(t, admin, "st") > hits {
			break // answered from memory again
		}
		if time.Now().After(deadline) {
			t.Fatal("reads did not come from memory again after the stream moved")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("stale answers stopped %v after the stall began", lastStale)
}

// lastStaleUnderStall stalls the binary-log streams through the stall
// relay, then sets v of table's row 1 to 1..25 directly (bypassing the
// proxies), one every 100 ms, reading it through a proxy (read) right
// after each, and returns how long after the first write a read last
// missed one: stale answers must stop within the stall's detection.
func lastStaleUnderStall(t *testing.T, direct *sql.DB, table string, read func() int64) time.Duration {
	t.Helper()
	stalled.Store(true)
	t.Cleanup(func() { stalled.Store(false) })
	start := time.Now()
	var lastStale time.Duration
	for i := int64(1); i <= 25; i++ {
		if _, err := direct.Exec("UPDATE "+table+" SET v = ? WHERE id = 1", i); err != nil {
			t.Fatal(err)
		}
		if read() != i {
			lastStale = time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return lastStale
}

// newStallEnv starts a proxy whose backend is reached through a stall
// relay, with table st (id 1, v 0) cached, and returns it with an admin's
// connection.
func newStallEnv(t *testing.T) (*cacheEnv, *sql.DB) {
	b := testdb.Get(t)
	relay := newStallRelay(t, b.Addr)
	e := &cacheEnv{backend: b, db: b.NewDatabase(t), dataDir: t.TempDir(), yaml: "plugins:\n  - name: cache\n"}
	e.app = account{b.NewUser(t, "app-pw", "ALL", e.db), "app-pw"}
	e.admin = account{b.NewUser(t, "admin-pw", "ALL", e.db), "admin-pw"}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", e.admin.name, host))
	}
	b.Exec(t, "CREATE TABLE `"+e.db+"`.st (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+e.db+"`.st VALUES (1, 0)")
	e.proxy = startProxyOpts(t, relay, []account{e.app}, proxyOpts{yaml: e.yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE st CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "st", 1)
	return e, admin
}

// stalled freezes the backend-to-proxy direction of binary-log streams
// through a stall relay.
var stalled atomic.Bool

// newStallRelay relays TCP to backend; a connection whose client asks for
// a binary-log stream (COM_BINLOG_DUMP) stops receiving while stalled is
// set, without being closed.
func newStallRelay(t *testing.T, backend string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			var dump atomic.Bool
			go func() { // client to server, packet by packet
				defer s.Close()
				hdr := make([]byte, 4)
				for {
					if _, err := io.ReadFull(c, hdr); err != nil {
						return
					}
					body := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
					if _, err := io.ReadFull(c, body); err != nil {
						return
					}
					if len(body) > 0 && body[0] == 0x12 {
						dump.Store(true)
					}
					if _, err := s.Write(append(hdr, body...)); err != nil {
						return
					}
				}
			}()
			go func() { // server to client
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					for dump.Load() && stalled.Load() {
						time.Sleep(10 * time.Millisecond)
					}
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestClusterStalledLeaderStream: in a cluster only the leader follows the
// binary log, and the other proxies see writes that bypass the proxies
// only through the versions it bumps. When the leader's stream stalls, a
// follower must stop answering from memory as the leader does (within
// about a second), and resume once the stream has caught up.
func TestClusterStalledLeaderStream(t *testing.T) {
	e := newClusterEnvVia(t, 2, func(backend string) string { return newStallRelay(t, backend) })
	db := e.conn(t, e.follower(e.cacheKV(t)), e.app)
	read := func() (v int64, memory bool) {
		before := e.hits(t, db)
		if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v, e.hits(t, db) > before
	}
	waitFor(t, 30*time.Second, "reads from memory on the follower", func() (bool, error) {
		_, memory := read()
		return memory, nil
	})
	var inval string
	if err := db.QueryRow("SELECT invalidation FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&inval); err != nil || inval != "binlog (through the leader)" {
		t.Errorf("the follower's invalidation column: %q, %v", inval, err)
	}
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.cacheEnv.db, nil))
	lastStale := lastStaleUnderStall(t, direct, "kv", func() int64 {
		v, _ := read()
		return v
	})
	if lastStale > 1500*time.Millisecond {
		t.Errorf("with the leader's stream stalled, a follower still missed a write that bypassed the proxies %v after the stall began", lastStale)
	}
	if err := db.QueryRow("SELECT invalidation FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&inval); err != nil || inval != "binlog (the leader has not caught up)" {
		t.Errorf("the follower's invalidation column during the stall: %q, %v", inval, err)
	}
	stalled.Store(false)
	waitFor(t, 10*time.Second, "memory reads on the follower after the stream moved", func() (bool, error) {
		v, memory := read()
		if v != 25 {
			t.Fatalf("after the stall: v = %d, want 25", v)
		}
		return memory, nil
	})
	t.Logf("the follower's stale answers stopped %v after the stall began", lastStale)
}

// TestTransactionSnapshotAfterABackendRead: a transaction whose first read
// tries memory but is answered by the backend (here: a statement shape
// not learned yet) takes InnoDB's snapshot there; a later read of the same
// table must not come from memory at an older version. A stalled binary-log
// stream holds the proxy's copy behind a direct write for the second that
// the stall takes to detect.
func TestTransactionSnapshotAfterABackendRead(t *testing.T) {
	e, _ := newStallEnv(t)
	b := e.backend
	app := e.open(t, e.app)
	learned := "SELECT v FROM st WHERE id = 1"
	for i := 0; i < 3; i++ {
		var v int
		if err := app.QueryRow(learned).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	direct := testdb.Open(t, testdb.DSN(b.Addr, e.app.name, e.app.password, e.db, nil))
	stalled.Store(true)
	t.Cleanup(func() { stalled.Store(false) })
	if _, err := direct.Exec("UPDATE st SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	conn, err := app.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var first, second int
	// A shape never run: the backend answers it, and takes the snapshot.
	if err := conn.QueryRowContext(context.Background(), "SELECT v + 0 FROM st WHERE id = 1").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(context.Background(), learned).Scan(&second); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if first != 1 || second != first {
		t.Errorf("one transaction read v = %d (the backend), then v = %d; MariaDB gives %d both times", first, second, first)
	}
}
