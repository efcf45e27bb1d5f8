package cache

import (
	"strings"
	"time"

	"tableproxy/lease"
	"tableproxy/plugins"
)

// CatalogSource is where the list of cached tables lives: the cluster's
// replicated log, which every proxy of the cluster changes.
type CatalogSource interface {
	List() []Entry
	Put(Entry) error
	Delete(lease.TableID) (bool, error)
	// OnChange calls fn after the list changed, here or on another proxy:
	// the cache follows it.
	OnChange(fn func())
	// Learned says this proxy has learned of every entry up to index
	// (Entry.Index): it has added those tables, and covered the writes it
	// let through before it had (see learn.go).
	Learned(index uint64)
}

// Leases is the lease manager the cache runs on. In a cluster one proxy,
// the leader, follows the binary log and proposes the version bumps for
// everyone (FollowBinlog); it tells the others whether it is watching
// (SetBinlogWatched), and they answer from memory only while it is
// (BinlogWatched).
type Leases interface {
	lease.Manager
	FollowBinlog() bool
	SetBinlogWatched(ok bool)
	BinlogWatched() bool
	// CaughtUp is closed once this proxy has applied the cluster's log up
	// to a point after it started (lease.Raft.CaughtUp): the catalog then
	// holds every table cached before it started.
	CaughtUp() <-chan struct{}
}

// Cluster is what the proxies' cluster gives the cache.
type Cluster struct {
	Leases  Leases
	Catalog CatalogSource
}

// Open builds the cache plugin from its options, on a cluster's leases
// and catalog.
func Open(raw plugins.Options, env plugins.Env, c Cluster) (*Plugin, error) {
	opts, limit, err := parseOptions(raw, env)
	if err != nil {
		return nil, err
	}
	return build(env, c.Leases, c.Catalog, limit, opts), nil
}

// followCatalog keeps the cached tables equal to a shared catalog's.
func (p *Plugin) followCatalog() {
	p.catalog.OnChange(p.syncCatalog)
}

// syncCatalog makes the cached tables the catalog's, as it is now, and
// then says which entries this proxy has learned of. Once statements run
// (after catching up with the log), the sessions that may have written a
// table it adds are covered first (see learn.go); before that they have
// been held, and have written nothing.
func (p *Plugin) syncCatalog() {
	p.catMu.Lock()
	defer p.catMu.Unlock()
	list := p.catalog.List()
	want := map[lease.TableID]bool{}
	var added []lease.TableID
	var newest uint64
	for _, e := range list {
		want[e.ID()] = true
		newest = max(newest, e.Index)
		ts := p.table(e.ID())
		if ts == nil {
			p.addTable(e)
			p.startWatcher(e.CachedBy)
			added = append(added, e.ID())
			continue
		}
		if ts.catalogPending.Swap(e.Pending) && !e.Pending {
			p.requestLoad(e.ID())
		}
	}
	for _, id := range p.cachedIDs() {
		if !want[id] {
			p.removeTable(id)
		}
	}
	if p.catalogKnown.Load() || p.catalogLate.Load() {
		p.cover(added)
	}
	p.catalog.Learned(newest)
}

// catalogWait bounds how long statements wait, after the proxy started,
// for it to know the tables cached before it started (awaitCatalog).
const catalogWait = 10 * time.Second

// catchUp marks the catalog known once the log has caught up, after
// taking the catalog as it is then.
func (p *Plugin) catchUp(caughtUp <-chan struct{}) {
	select {
	case <-caughtUp:
	case <-p.stop:
		return
	}
	p.syncCatalog()
	p.catalogKnown.Store(true)
	close(p.catalogSynced)
}

// cannotWrite reports whether st writes no table whatever its tables are:
// a statement that needs no intent, and so need not wait for the catalog.
// A SELECT or SET that calls a function is read by the account (a stored
// function may write).
func cannotWrite(st *plugins.Statement) bool {
	switch st.Kind {
	case plugins.KindShow, plugins.KindUse, plugins.KindBegin, plugins.KindCommit, plugins.KindRollback, plugins.KindKill, plugins.KindAdmin:
		return true
	case plugins.KindSelect, plugins.KindSet:
		if st.Command == plugins.ComStmtPrepare {
			return false
		}
		if !strings.Contains(st.SQL, "(") {
			return true
		}
		a, err := st.Analysis()
		return err == nil && a.Effect == plugins.EffectNone && !a.Unparsed
	}
	return false
}

// awaitCatalog holds a statement until this proxy knows every table
// cached in the cluster before it started. A proxy that has just joined
// learns them as it catches up with the log; until then it would take a
// cached table for an uncached one, and let a write to it through with no
// intent while the other proxies serve their copies from memory (they
// would learn of it only from the binary log, too late). The wait is
// bounded: a proxy that cannot reach its cluster stops waiting catalogWait
// after it started, and its writes to tables it does not know are cached
// are then seen by the others as writes that bypass the proxies are.
func (p *Plugin) awaitCatalog() {
	p.awaitCatalogAtMost(time.Until(p.catalogBy))
}

// readCatalogWait is the most a statement that writes nothing waits for
// the catalog: long enough for a proxy that has just started to catch up
// (milliseconds), short for one that takes seconds (a restarted member
// replaying its log), whose reads then go to the backend.
const readCatalogWait = 100 * time.Millisecond

// awaitCatalogAtMost is awaitCatalog, waiting at most wait.
func (p *Plugin) awaitCatalogAtMost(wait time.Duration) {
	if p.catalogKnown.Load() {
		return
	}
	wait = min(wait, time.Until(p.catalogBy))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.catalogSynced:
	case <-p.stop:
	case <-t.C:
		if time.Now().Before(p.catalogBy) {
			return // (a read's shorter wait)
		}
		if !p.catalogLate.Swap(true) {
			p.log.Warn("cache: this proxy has not caught up with the cluster's log; statements go on without knowing every cached table",
				"waited", catalogWait)
		}
	}
}

// followsBinlogHere reports whether this proxy should follow the binary
// log: always on one proxy, only on the leader of a cluster.
func (p *Plugin) followsBinlogHere() bool { return p.viaLeader() == nil }

// viaLeader returns the cluster's role when another proxy, the leader,
// follows the binary log for this one; nil when this proxy follows it.
func (p *Plugin) viaLeader() Leases {
	if !p.leases.FollowBinlog() {
		return p.leases
	}
	return nil
}
