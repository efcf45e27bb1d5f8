package cache

import (
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/sizedlru"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// stagedCatalog is the cluster's catalog as a proxy that has just joined
// sees it: empty until it has caught up with the log.
type stagedCatalog struct {
	mu      sync.Mutex
	list    []Entry
	learned uint64 // what the cache said it learned last
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
func (c *stagedCatalog) Learned(i uint64)                   { c.mu.Lock(); c.learned = i; c.mu.Unlock() }

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
	p.effects = sizedlru.New[planKey, plugins.Analysis](1<<20, 16)
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

// openSessions is the proxy's account of transactions as a test sets it:
// the sessions open before any mark, each for as many more OpenBefore
// calls as it says (negative: for ever).
type openSessions struct {
	mu    sync.Mutex
	calls map[uint32]int
}

func (o *openSessions) Mark() uint64 { return 1 }

func (o *openSessions) OpenBefore(uint64) []uint32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []uint32
	for id, n := range o.calls {
		if n == 0 {
			continue
		}
		ids = append(ids, id)
		if n > 0 {
			o.calls[id] = n - 1
		}
	}
	return ids
}

// A table this proxy learns is cached while a session is in a transaction
// (or a statement) begun before: that session may have written it without
// an intent, so it gets one, held until its transaction ends, before the
// proxy says it has learned of the table. A session whose transaction ends
// while its intent opens does not keep it.
func TestLearningACachedTableCoversOpenSessions(t *testing.T) {
	f := newResultsFixture(t)
	p := f.p
	p.mu.Lock()
	p.changeTables(func(m map[lease.TableID]*tableState) { delete(m, f.id) })
	p.mu.Unlock()
	p.watchOnce.Do(func() {}) // no binary log here
	cat := &stagedCatalog{}
	p.catalog = cat
	p.catalogKnown.Store(true)
	// Session 9's transaction ends while its intent opens: listed, gone
	// once the intent is held.
	open := &openSessions{calls: map[uint32]int{9: 1}}
	p.txs = open
	entry := Entry{Schema: f.id.Schema, Table: f.id.Table, CachedBy: "app", Index: 5, Pending: true}
	tb := p.leases.(*memLeases).table(f.id)
	v := tb.version.Load()
	cat.set(entry)
	p.syncCatalog()
	p.heldMu.Lock()
	held9 := len(p.held[9])
	p.heldMu.Unlock()
	if n := tb.intents.Load(); n != 0 || held9 != 0 || tb.version.Load() != v+1 {
		t.Fatalf("session 9, ended: %d intents open, %d held, version %d (from %d); want its intent opened and ended",
			n, held9, tb.version.Load(), v)
	}
	cat.set()
	p.syncCatalog() // NOCACHE

	// Session 7 stays in its transaction.
	open.calls[7] = -1
	entry.Index = 6
	cat.set(entry)
	p.syncCatalog()
	ts := p.table(f.id)
	if ts == nil || !ts.catalogPending.Load() {
		t.Fatal("the table was not added pending")
	}
	if cat.learned != 6 {
		t.Fatalf("learned %d, want 6", cat.learned)
	}
	p.heldMu.Lock()
	held7 := len(p.held[7])
	p.heldMu.Unlock()
	if n := tb.intents.Load(); n != 1 || held7 != 1 {
		t.Fatalf("%d intents on the table after learning of it, %d held by session 7; want 1 and 1", n, held7)
	}
	if _, ok := ts.servable(); ok {
		t.Fatal("servable while pending")
	}
	open.mu.Lock()
	open.calls[7] = 0
	open.mu.Unlock()
	p.endWrites(7) // its transaction ends
	if n := tb.intents.Load(); n != 0 {
		t.Fatalf("%d intents left after the session's transaction ended", n)
	}
	entry.Pending = false
	cat.set(entry)
	p.syncCatalog()
	if ts.catalogPending.Load() {
		t.Fatal("still pending after the catalog said it is ready")
	}
}

// A statement that writes nothing is not held while the proxy catches up
// with its cluster: it goes to the backend at once (a member restarted
// with its data directory held every statement seconds before).
func TestReadDoesNotWaitForTheCatalog(t *testing.T) {
	f := newResultsFixture(t)
	p := f.p
	p.catalogKnown.Store(false)
	p.catalogSynced, p.catalogBy = make(chan struct{}), time.Now().Add(5*time.Second)
	for _, sql := range []string{"SELECT code FROM rates WHERE id = 1", "SELECT COUNT(*), MAX(code) FROM rates WHERE id IN (1, 2)", "SHOW TABLES", "COMMIT"} {
		r := plugins.Statement{ConnID: 9, User: "app", DB: "shop", Session: &plugins.SessionState{}, Backend: f.sess, Tx: f.sess}
		r.Reset(plugins.ComQuery, sql)
		start := time.Now()
		a := p.OnStatement(&r)
		if took := time.Since(start); took > time.Second || a.Verdict != plugins.Pass {
			t.Errorf("%s while catching up: %v after %v, want passed to the backend at once", sql, a.Verdict, took)
		}
	}
	// A SELECT that calls a function that may write still waits.
	r := plugins.Statement{ConnID: 9, User: "app", DB: "shop", Session: &plugins.SessionState{}, Backend: f.sess, Tx: f.sess}
	r.Reset(plugins.ComQuery, "SELECT shop.bump_rates(1)")
	if cannotWrite(&r) {
		t.Error("a stored function's call counted as writing nothing")
	}
}
