package cache

import (
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	lru "github.com/hashicorp/golang-lru/v2"

	"tableproxy/lease"
	"tableproxy/plugins"
)

// stagedCatalog is the cluster's catalog as a proxy that has just joined
// sees it: empty until it has caught up with the log.
type stagedCatalog struct {
	mu   sync.Mutex
	list []Entry
}

func (c *stagedCatalog) List() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Entry(nil), c.list...)
}

func (c *stagedCatalog) set(es ...Entry) {
	c.mu.Lock()
	c.list = es
	c.mu.Unlock()
}

func (c *stagedCatalog) Put(Entry) error                    { return nil }
func (c *stagedCatalog) Delete(lease.TableID) (bool, error) { return false, nil }
func (c *stagedCatalog) OnChange(func())                    {}

// A proxy that has not caught up with its cluster's log cannot tell a
// cached table from another: a write waits until it has, then opens an
// intent on the cached table it writes, as on any proxy. (Let through as a
// write of an uncached table, it would go to the backend while the other
// proxies serve the table from memory.)
func TestWriteWaitsForTheCatalog(t *testing.T) {
	f := newResultsFixture(t)
	p := f.p
	p.mu.Lock()
	p.changeTables(func(m map[lease.TableID]*tableState) { delete(m, f.id) }) // nothing known yet
	p.mu.Unlock()
	p.effects, _ = lru.New[planKey, plugins.Analysis](16)
	p.watchOnce.Do(func() {}) // no binary log here
	cat := &stagedCatalog{}
	p.catalog = cat
	p.catalogSynced, p.catalogBy = make(chan struct{}), time.Now().Add(5*time.Second)
	caughtUp := make(chan struct{})
	go p.catchUp(caughtUp)
	time.AfterFunc(50*time.Millisecond, func() {
		cat.set(Entry{Schema: f.id.Schema, Table: f.id.Table, CachedBy: "app"})
		close(caughtUp)
	})

	w := plugins.Statement{ConnID: 8, User: "app", DB: "shop", Session: &plugins.SessionState{}, Backend: f.sess, Tx: f.sess}
	w.Reset(plugins.ComQuery, "UPDATE rates SET code = 'GBP' WHERE code = 'EUR'")
	if a := p.OnStatement(&w); a.Verdict != plugins.Pass {
		t.Fatalf("the write was not passed on: %v", a.Verdict)
	}
	tb := p.leases.(*memLeases).table(f.id)
	if n := tb.intents.Load(); n != 1 {
		t.Fatalf("the write of a cached table went on with %d intents on it", n)
	}
	p.OnResult(&w, &plugins.Outcome{Source: plugins.FromBackend, Status: mysql.SERVER_STATUS_AUTOCOMMIT})
	if n := tb.intents.Load(); n != 0 {
		t.Fatalf("%d intents left after the write's answer", n)
	}
}

// A proxy that cannot reach its cluster stops holding statements once
// catalogWait has passed since it started.
func TestCatalogWaitIsBounded(t *testing.T) {
	f := newResultsFixture(t)
	p := f.p
	p.catalogSynced, p.catalogBy = make(chan struct{}), time.Now().Add(30*time.Millisecond)
	start := time.Now()
	p.awaitCatalog()
	p.awaitCatalog()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("statements held %s by a catalog that never came", took)
	}
}
