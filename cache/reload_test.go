package cache

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/cache/eval"
	"tableproxy/internal/testdb"
	"tableproxy/lease"
	"tableproxy/plugins"
)

func TestLoadBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		took   time.Duration
		wasted int
		want   time.Duration
	}{
		{30 * ms, 0, 0},
		{30 * ms, 1, 30 * ms},
		{30 * ms, 2, 60 * ms},
		{30 * ms, 3, 120 * ms},
		{30 * ms, 7, 1920 * ms},
		{30 * ms, 8, maxLoadBackoff},
		{30 * ms, 1000, maxLoadBackoff},
		{time.Microsecond, 1, minLoadUnit},
		{5 * time.Second, 1, 5 * time.Second},
		{5 * time.Second, 4, 5 * time.Second},
	} {
		if got := loadBackoff(c.took, c.wasted); got != c.want {
			t.Errorf("loadBackoff(%v, %d) = %v, want %v", c.took, c.wasted, got, c.want)
		}
	}
}

// asAdmin opens connections to the test backend as its admin, whoever
// asks.
type asAdmin struct{ b testdb.Backend }

func (a asAdmin) Connect(_ context.Context, _, db string) (*client.Conn, error) {
	return client.Connect(a.b.Addr, a.b.RootUser, a.b.RootPassword, db)
}

func (asAdmin) AccountsChanged() {}

// TestReloadLetsTheReplacedCopyGo: once a reload has replaced a copy,
// nothing of the cache holds the old one, so a table costs one copy's
// memory, not two.
func TestReloadLetsTheReplacedCopyGo(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t, "CREATE TABLE `"+db+"`.rates (id INT PRIMARY KEY, code CHAR(3))", "INSERT INTO `"+db+"`.rates VALUES (1, 'EUR')")
	p := &Plugin{log: slog.Default(), leases: newMemLeases(), backend: asAdmin{b}, colls: eval.NewCollations(), maxPlannedText: 64 << 10,
		maxBytes: 1 << 20, opts: Options{LoadTimeout: plugins.Duration(10 * time.Second)}}
	id := lease.TableID{Schema: db, Table: "rates"}
	ts := &tableState{entry: Entry{Schema: db, Table: "rates"}, lease: p.leases.Table(id)}
	p.mu.Lock()
	p.changeTables(func(m map[lease.TableID]*tableState) { m[id] = ts })
	p.mu.Unlock()

	p.load(id)
	first := ts.snap.Load()
	if first == nil {
		t.Fatalf("not loaded: %v", *ts.lastErr.Load())
	}
	old := weak.Make(first)
	first = nil
	p.leases.Invalidate(id) // a write
	p.load(id)
	if s := ts.snap.Load(); s == nil || s == old.Value() {
		t.Fatalf("not reloaded after a write: %v", ts.lastErr.Load())
	}
	runtime.GC()
	if old.Value() != nil {
		t.Error("the copy a reload replaced is still held in memory")
	}
	runtime.KeepAlive(p) // the plugin, which holds the table, lives on
}
