// Package cache owns cached tables: which tables are cached (the catalog),
// their in-memory copies (snapshots) and the loader that keeps them at the
// current version, the admin SQL that turns caching on and off, and the
// bookkeeping that makes every write to a cached table bump its version.
//
// Its subpackages each do one job and import nothing of this one:
// cache/eval plans a read and computes its answer from a copy, cache/load
// reads a copy from the backend, cache/results stores the backend's
// answers for replay. This package decides per statement which of them
// answers (and records why, for EXPLAIN LAST STATEMENT and the metrics),
// keeps the catalog and the copies at their versions, and answers the
// client.
//
// The cache is a plugin on the proxy's chain. Whether a copy may be served
// is the lease package's decision; this package never serves a copy whose
// version is not the one the lease manager reports as servable.
//
// What can go wrong, and what stops it: a write the cache does not see
// (stored functions, CALL, unparsable statements are treated as writing
// every cached table); a copy loaded across a write (copies are tagged with
// the version read before the load began, and a write bumps it); a
// transaction that writes a cached table and keeps going (the write intent
// is held until the transaction ends, or the session does).
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/binlog"
	"tableproxy/cache/eval"
	"tableproxy/cache/load"
	"tableproxy/cache/results"
	"tableproxy/configs"
	"tableproxy/internal/failpoint"
	"tableproxy/internal/sizedlru"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Name is the plugin's name in the config.
const Name = "cache"

// Options are the cache plugin's settings.
type Options struct {
	// MaxTableSize caps one table's data (on the backend, and in memory);
	// "64MB" by default, as TiDB's cached tables.
	MaxTableSize string `json:"max_table_size"`
	// MaxTotalSize caps the memory of every cached table's copy together
	// (see budget.go); "256MB" by default, "0" for no cap.
	MaxTotalSize string `json:"max_total_size"`
	// AcceptStaleRisk allows caching when the backend's binary log cannot
	// show writes that bypass the proxy; such writes then stay invisible
	// to cached reads until the next write through the proxy.
	AcceptStaleRisk bool `json:"accept_stale_risk"`
	// LoadTimeout bounds one table load.
	LoadTimeout plugins.Duration `json:"load_timeout"`
	// BinlogUser is deprecated: the proxy's top-level binlog_user names
	// the one user the binary log is read as, and takes this when it is
	// not set (see configs.ResolveBinlogUser).
	BinlogUser string `json:"binlog_user"`
	// ResultCacheSize is the memory the result cache may hold ("64MB" by
	// default; "0" turns it off), and ResultCacheEntryMax the largest
	// answer it stores ("1MB" by default). See package cache/results.
	ResultCacheSize     string `json:"result_cache_size"`
	ResultCacheEntryMax string `json:"result_cache_entry_max"`
	// PlanCacheSize and MetadataCacheSize bound in bytes the plans kept
	// by statement shape ("32MB") and the column metadata learned for
	// them ("16MB"); MaxPlannedText is the longest statement text planned
	// ("64KB"): a longer one goes to the backend. See memory.go.
	PlanCacheSize     string `json:"plan_cache_size"`
	MetadataCacheSize string `json:"metadata_cache_size"`
	MaxPlannedText    string `json:"max_planned_text"`
}

// TiDB's error for what cached tables do not support.
const erCacheUnsupported = 8242

func errUnsupported(what string) *mysql.MyError {
	return &mysql.MyError{Code: erCacheUnsupported, State: "HY000", Message: fmt.Sprintf("'%s' is unsupported on cache tables.", what)}
}

// Plugin is the cache on the plugin chain.
type Plugin struct {
	log        *slog.Logger
	backend    plugins.Backend
	binlog     *binlog.Follower
	leases     Leases
	privileges lease.Table // see privilegesID
	limits     queryLimits // users with MAX_QUERIES_PER_HOUR (limits.go)
	indirect   indirectWrites
	swaps      swaps // an online ADD INDEX's RENAME, announced (swaps.go)
	catalog    CatalogSource
	txs        plugins.Transactions // the sessions' transactions, to cover (learn.go)
	maxBytes   int64
	budget     int64 // max_total_size; 0: none (budget.go)
	opts       Options

	// tables are the cached tables. The map is never changed once stored:
	// CACHE and NOCACHE store a new one (serialized by mu), so statements
	// read it without a lock (a read lock is two atomic updates of one
	// shared word, which the CPUs pass back and forth).
	mu     sync.Mutex
	tables atomic.Pointer[map[lease.TableID]*tableState]

	heldMu sync.Mutex // guards held
	held   map[uint32][]heldWrite

	loads    chan lease.TableID
	stop     chan struct{}
	loaderWG sync.WaitGroup

	watchOnce sync.Once
	watch     atomic.Pointer[watcher]

	// learned is each statement shape's column metadata, as the backend
	// sent it, keyed by shape and session configuration.
	learned *sizedlru.Cache[defsKey, *learned]
	// plans are planning outcomes by statement shape; purged when the set
	// of cached tables changes. planGen counts removals from it, after
	// they are done: a session's memo of entries (planMemo) holds only
	// within one count.
	plans   *sizedlru.Cache[planKey, *planEntry]
	planGen atomic.Uint64
	// effects is each statement shape's Analysis (writes and DDL), so
	// that a repeated write is not parsed again.
	effects *sizedlru.Cache[planKey, plugins.Analysis]
	// maxPlannedText is the longest text planned (max_planned_text).
	maxPlannedText int
	// colls are the backend's collations, as far as the proxy compares
	// strings itself.
	colls *eval.Collations

	// catalogKnown is set once the cached tables include every table the
	// cluster cached before this proxy started (catchUp); catalogSynced is
	// closed then. Statements wait for it until catalogBy (awaitCatalog).
	// catMu serializes the catalog's syncs; catalogLate is set once
	// statements stopped waiting without it.
	catalogKnown  atomic.Bool
	catalogLate   atomic.Bool
	catalogSynced chan struct{}
	catalogBy     time.Time
	catMu         sync.Mutex

	dropped     atomic.Uint64 // tables dropped for growing past the cap
	overBudgetN atomic.Uint64 // CACHEs refused and loads not done for the budget
	// passReasons counts the statements sent to the backend, by reason.
	passReasons [eval.NumReasons]atomic.Uint64
	// gone are the cached tables that were dropped or renamed (see
	// tableGone); goneMu guards it.
	goneMu sync.Mutex
	gone   map[lease.TableID]goneTable
	// predicts are the accounts of the statements this proxy's sessions
	// sent, by shape, which the binary log checks (predictions.go).
	predicts predictions
	// conservatives counts the requests taken as writes of every cached
	// table because their effect could not be named, by reason.
	conservatives [plugins.NumConservative]atomic.Uint64
	// warnedUnchecked: a load could not check its snapshot against the
	// binary log's end, and the log said so (once per process).
	warnedUnchecked atomic.Bool

	// intents and intentNanos count the write intents opened and the time
	// they took (revoking the other proxies' leases): see WriteCost.
	intents, intentNanos atomic.Uint64

	results *results.Cache // nil when turned off
	gens    atomic.Uint64
}

// tableState is one cached table's live state.
type tableState struct {
	entry   Entry
	lease   lease.Table
	snap    atomic.Pointer[eval.Snapshot]
	pending atomic.Bool // a load is queued or running
	// catalogPending: not every proxy of the cluster has learned yet that
	// the table is cached (Entry.Pending); it is not served or loaded.
	catalogPending atomic.Bool
	lastErr        atomic.Pointer[string]
	hits           atomic.Uint64
	passes         atomic.Uint64
	// gen is new each time the table is cached: its version does not move
	// while it is not cached, so result-cache keys hold both.
	gen        uint64
	resultHits atomic.Uint64 // hits answered by the result cache
	// missed counts the writes of the table, seen in the binary log, by
	// statements this proxy sent whose account did not name it (see
	// predictions.go).
	missed atomic.Uint64
	// unguarded counts writes in flight that no intent covers (the lease
	// manager could not open one): until each has been answered and the
	// version bumped after it, this proxy neither serves nor loads the
	// table, whatever the lease says. epoch goes up as each begins and
	// ends; a copy is served only at the epoch its load began at. (The
	// version cannot stand for this: a bump proposed through another node
	// may be applied here only after the write's answer.)
	unguarded atomic.Int32
	epoch     atomic.Uint64

	// The reload backoff; the loader's goroutine alone touches these but
	// retryArmed. A copy replaced before it answered a single read was
	// loaded in vain: each one in a row doubles the wait before the next
	// load (loadBackoff), so a table written all the time is not loaded
	// all the time (its reads go to the backend anyway).
	loadedHits uint64 // hits when the current copy was stored
	// judged is the copy whose use was last judged, by identity only: a
	// pointer would keep a replaced copy, a whole table, in memory.
	judged     weak.Pointer[eval.Snapshot]
	wasted     int       // copies in a row that answered nothing
	notBefore  time.Time // no load before
	retryArmed atomic.Bool
	// awaitsRoom: its last load did not fit in max_total_size; it is
	// loaded again on its next write, or when another table's copy goes.
	awaitsRoom atomic.Bool
}

// loadBackoff is how long to wait after a load that took took, when the
// wasted copies before it answered nothing: zero after a useful copy,
// then took, 2*took, 4*took ... up to maxLoadBackoff (or took, if one load
// takes longer), so that loads in vain use at most half of the loader's
// time, and soon far less.
func loadBackoff(took time.Duration, wasted int) time.Duration {
	if wasted <= 0 {
		return 0
	}
	took = max(took, minLoadUnit)
	limit := max(maxLoadBackoff, took)
	if wasted > 20 || took<<(wasted-1) > limit {
		return limit
	}
	return took << (wasted - 1)
}

const (
	// returnAfterLoad is the size of copy after whose load the memory
	// freed is returned to the system at once.
	returnAfterLoad = 4 << 20
	// maxLoadBackoff bounds the reload backoff: a table that stops being
	// written is back in memory within about this long.
	maxLoadBackoff = 2 * time.Second
	// minLoadUnit is the least a load counts as taking, for the backoff.
	minLoadUnit = 5 * time.Millisecond
)

// servable is the lease's decision, overruled while an unguarded write is
// in flight.
func (ts *tableState) servable() (lease.Version, bool) {
	v, ok := ts.lease.Servable()
	return v, ok && ts.unguarded.Load() == 0 && !ts.catalogPending.Load()
}

// heldWrite is what a session's write holds until its statement, or its
// transaction, ends: an intent, or the tables of a write without one.
type heldWrite struct {
	in        *lease.Intent
	unguarded []*tableState
}

// CheckOptions checks the plugin's options as Open does, without opening
// it (tableproxy check-config).
func CheckOptions(raw plugins.Options) error {
	_, _, err := readOptions(raw)
	return err
}

// readOptions reads the plugin's options, with their defaults, and checks
// them; it returns them and the per-table size limit.
func readOptions(raw plugins.Options) (Options, int64, error) {
	opts := Options{MaxTableSize: "64MB", MaxTotalSize: defaultMaxTotalSize, LoadTimeout: plugins.Duration(60 * time.Second)}
	if err := plugins.DecodeOptions(raw, &opts); err != nil {
		return opts, 0, err
	}
	limit, err := configs.ParseByteSize(opts.MaxTableSize)
	if err != nil || limit <= 0 {
		return opts, 0, fmt.Errorf("max_table_size: %q: want a size like 64MB", opts.MaxTableSize)
	}
	if _, _, err := resultCacheSizes(opts); err != nil {
		return opts, 0, err
	}
	if _, err := parseBudget(opts); err != nil {
		return opts, 0, err
	}
	if _, err := readMemorySizes(opts); err != nil {
		return opts, 0, err
	}
	return opts, limit, nil
}

// parseOptions reads the plugin's options, with their defaults, and
// checks them and the environment.
func parseOptions(raw plugins.Options, env plugins.Env) (Options, int64, error) {
	opts, limit, err := readOptions(raw)
	if err != nil {
		return opts, 0, err
	}
	if env.Backend == nil {
		return opts, 0, fmt.Errorf("needs a backend connector")
	}
	if env.Binlog == nil {
		return opts, 0, fmt.Errorf("needs the binary log follower")
	}
	return opts, limit, nil
}

// build makes the plugin for the environment and exposes its metrics.
func build(env plugins.Env, leases Leases, cat CatalogSource, limit int64, opts Options) *Plugin {
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	p := New(log, env.Backend, env.Binlog, env.Transactions, leases, cat, limit, opts)
	if env.Metrics != nil {
		p.registerMetrics(env.Metrics)
	}
	return p
}

// New builds the plugin and starts loading the catalog's tables.
func New(log *slog.Logger, backend plugins.Backend, follower *binlog.Follower, txs plugins.Transactions, leases Leases, cat CatalogSource, maxBytes int64, opts Options) *Plugin {
	p := &Plugin{log: log, backend: backend, binlog: follower, txs: txs, leases: leases, catalog: cat, maxBytes: maxBytes, opts: opts,
		held:  map[uint32][]heldWrite{},
		loads: make(chan lease.TableID, 1024), stop: make(chan struct{})}
	p.budget, _ = parseBudget(opts) // checked by parseOptions
	p.privileges = leases.Table(privilegesID)
	sizes, _ := readMemorySizes(opts) // checked by readOptions
	p.newStatementCaches(sizes)
	p.colls = eval.NewCollations()
	p.results = newResultCacheFor(log, opts)
	leases.Subscribe(func(id lease.TableID, _ lease.Version) {
		if id == accountsID && backend != nil {
			// Grants changed somewhere (seen here, in the binary log, or by
			// another proxy of the cluster): new sessions log in afresh.
			backend.AccountsChanged()
		}
		p.requestLoad(id)
	})
	for _, e := range cat.List() {
		p.addTable(e)
	}
	p.followCatalog()
	p.catalogSynced, p.catalogBy = make(chan struct{}), time.Now().Add(catalogWait)
	go p.catchUp(leases.CaughtUp())
	p.loaderWG.Add(1)
	go p.loader()
	if list := cat.List(); len(list) > 0 {
		p.startWatcher(list[0].CachedBy)
	}
	return p
}

// startWatcher starts following the binary log, once, as the follower's
// user, or when the proxy has none, as user (the admin who cached the
// table).
func (p *Plugin) startWatcher(user string) {
	p.watchOnce.Do(func() {
		w := &watcher{p: p, user: p.binlog.User(user)}
		p.watch.Store(w)
		p.loaderWG.Add(1)
		go func() {
			defer p.loaderWG.Done()
			w.run(p.stop)
		}()
	})
}

// bypassWritesVisible reports whether writes that bypass the proxy are
// being seen (or the operator accepted that they are not).
func (p *Plugin) bypassWritesVisible() bool {
	if p.opts.AcceptStaleRisk {
		return true
	}
	if r := p.viaLeader(); r != nil {
		// The cluster's leader follows it and bumps versions through the
		// log, while it says it has caught up.
		return r.BinlogWatched()
	}
	w := p.watch.Load()
	return w != nil && w.following.Load() && w.caughtUp.Load()
}

// Ready reports whether the cache can answer from memory, and if not,
// why: with tables cached, while writes that bypass the proxy are seen
// (the binary log followed and caught up, here or by the cluster's
// leader). With none cached there is nothing to wait for.
func (p *Plugin) Ready() (bool, string) {
	if len(p.cachedTables()) == 0 || p.bypassWritesVisible() {
		return true, ""
	}
	return false, "the binary log is not followed, or not caught up: cached tables are read from the backend"
}

// Name implements plugins.Plugin.
func (p *Plugin) Name() string { return Name }

// Close stops the loader.
func (p *Plugin) Close() error {
	close(p.stop)
	p.loaderWG.Wait()
	if p.results != nil {
		p.results.Store.Close()
	}
	return nil
}

func (p *Plugin) addTable(e Entry) *tableState {
	p.mu.Lock()
	ts := p.table(e.ID())
	if ts == nil {
		ts = &tableState{entry: e, lease: p.leases.Table(e.ID()), gen: p.gens.Add(1)}
		ts.catalogPending.Store(e.Pending)
		p.changeTables(func(m map[lease.TableID]*tableState) { m[e.ID()] = ts })
	}
	p.mu.Unlock()
	p.forgetPlans()
	p.requestLoad(e.ID())
	return ts
}

// privilegesID names, in the lease manager, the backend's privileges: not
// a table, but versioned like one, so that every proxy of a cluster sees
// its changes. A statement that may change privileges (GRANT, REVOKE,
// CREATE USER, FLUSH PRIVILEGES, ...: anything whose effect the proxy
// cannot name), through this proxy or in the binary log, and a write of
// the mysql schema's tables bump it. The column definitions learned for a
// shape are kept under the version at which the backend answered it, so
// after a bump each account learns each shape again, and the backend
// checks again that it may read it.
var privilegesID = lease.TableID{Schema: "mysql", Table: "#privileges"}

// accountsID names, in the lease manager, the backend's accounts: bumped
// (with privilegesID) by what may change who may log in or with which
// rights (see plugins.MayChangeAccounts), through this proxy or in the
// binary log, by a write of the mysql schema's tables, and when the log
// may have been missed. Every proxy of a cluster sees its bumps, and then
// gives new sessions fresh logins instead of pooled connections (see
// plugins.Backend.AccountsChanged).
var accountsID = lease.TableID{Schema: "mysql", Table: "#accounts"}

// privilegesVersion is the current version of the backend's privileges.
func (p *Plugin) privilegesVersion() lease.Version {
	if p.privileges == nil {
		return 0
	}
	return p.privileges.Version()
}

func (p *Plugin) removeTable(id lease.TableID) {
	p.mu.Lock()
	p.changeTables(func(m map[lease.TableID]*tableState) { delete(m, id) })
	p.mu.Unlock()
	p.forgetPlans()
	// Its copy's memory is free: the tables that did not fit may now.
	for other, ts := range p.cachedTables() {
		if ts.awaitsRoom.Load() {
			p.requestLoad(other)
		}
	}
}

// changeTables stores a changed copy of the cached tables; p.mu is held.
func (p *Plugin) changeTables(change func(map[lease.TableID]*tableState)) {
	m := maps.Clone(p.cachedTables())
	if m == nil {
		m = map[lease.TableID]*tableState{}
	}
	change(m)
	p.tables.Store(&m)
}

// cachedTables is the current map of cached tables, not to be changed.
func (p *Plugin) cachedTables() map[lease.TableID]*tableState {
	if m := p.tables.Load(); m != nil {
		return *m
	}
	return nil
}

// forgetPlans empties the plan cache (the set of cached tables changed).
func (p *Plugin) forgetPlans() {
	if p.plans != nil {
		p.plans.Purge()
		p.planGen.Add(1)
	}
}

// forgetPlan removes one entry from the plan cache.
func (p *Plugin) forgetPlan(k planKey) {
	p.plans.Remove(k)
	p.planGen.Add(1)
}

func (p *Plugin) table(id lease.TableID) *tableState { return p.cachedTables()[id] }

func (p *Plugin) cachedIDs() []lease.TableID {
	return slices.Collect(maps.Keys(p.cachedTables()))
}

// Servable returns the snapshot of id that may answer a read now, if any:
// the table is cached, loaded at the version the lease manager says is
// current, and no write to it is in flight.
func (p *Plugin) Servable(id lease.TableID) (*eval.Snapshot, bool) {
	ts := p.table(id)
	if ts == nil {
		return nil, false
	}
	// Whether the binary log is watched is read before the version: it
	// turns true only after the bumps for what the log showed, so a
	// version read after it is at least theirs.
	if !p.bypassWritesVisible() {
		return nil, false
	}
	v, ok := ts.servable()
	s := ts.snap.Load()
	if !ok || s == nil || s.Version != v || s.Epoch != ts.epoch.Load() {
		return nil, false
	}
	return s, true
}

// OnStatement implements plugins.StatementFilter.
func (p *Plugin) OnStatement(st *plugins.Statement) plugins.Action {
	if !p.catalogKnown.Load() && cannotWrite(st) {
		p.awaitCatalogAtMost(readCatalogWait)
	}
	if !p.catalogKnown.Load() && cannotWrite(st) {
		// Catching up with the cluster's log (a member restarted): a
		// statement that writes nothing is not held for it. It goes to
		// the backend; memory is read once this proxy has caught up.
		if st.Session != nil {
			p.explain(session(st), st.SQL, false, eval.Because(eval.StaleCopy,
				"this proxy is catching up with its cluster's log: cached tables are read from the backend until it has"))
		}
		return plugins.Continue
	}
	p.awaitCatalog()
	if st.Session == nil {
		return p.onStatement(st)
	}
	if len(p.cachedTables()) == 0 {
		a := p.onStatement(st)
		if si, ok := st.Session.Get(sessionKey{}).(*sessionInfo); ok && a.Verdict == plugins.Pass {
			payCounts(st, si)
		}
		return a
	}
	si := session(st)
	si.followTx(st.Tx)
	if a, ok := p.beginDeferred(st, si); ok {
		p.explain(si, st.SQL, true, eval.Why{Text: "answered by the proxy: the transaction has not reached the backend (a plain BEGIN is sent there before the transaction's first statement that goes there)"})
		return a
	}
	si.pureRead = false
	a := p.onStatement(st)
	owing := a.Verdict == plugins.Pass && si.counts.owed && mentionsCounts(st.SQL)
	if si.deferred && a.Verdict == plugins.Pass {
		if si.pureRead && !owing && (st.Command == plugins.ComQuery || st.Command == plugins.ComStmtExecute) {
			// BEGIN travels with the statement: no round trip of its own.
			si.deferred = false
			st.Begin = true
		} else if err := startDeferred(st, si); err != nil {
			return plugins.RefuseWith(err)
		}
	}
	if owing {
		payCounts(st, si) // (after BEGIN, which resets ROW_COUNT())
	}
	return a
}

func (p *Plugin) onStatement(st *plugins.Statement) plugins.Action {
	if st.Kind == plugins.KindSelect && st.Command != plugins.ComStmtPrepare {
		if len(p.cachedTables()) > 0 {
			return p.read(st)
		}
		p.explain(session(st), st.SQL, false, eval.Because(eval.NothingCached, "no table is cached"))
		return plugins.Continue
	}
	if st.Kind == plugins.KindShow && isExplainLast(st.SQL) {
		if st.Command == plugins.ComStmtPrepare {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_UNSUPPORTED_PS, "This command is not supported in the prepared statement protocol yet"))
		}
		return p.explainLast(st)
	}
	if st.Command != plugins.ComStmtPrepare {
		p.explain(session(st), st.SQL, false, eval.Because(eval.NotSelect, "not a SELECT: statements other than SELECT always go to the backend"))
	}
	switch st.Kind {
	case plugins.KindSet:
		if !strings.Contains(st.SQL, "(") {
			return plugins.Continue // no call: no stored function
		}
	case plugins.KindSelect, plugins.KindShow, plugins.KindUse, plugins.KindBegin,
		plugins.KindCommit, plugins.KindRollback, plugins.KindKill, plugins.KindAdmin:
		// No write, no DDL, no CACHE/NOCACHE. (A SELECT that calls a stored
		// function is planned as a write once reads are served.)
		return plugins.Continue
	}
	if len(p.cachedTables()) == 0 && st.Kind != plugins.KindDDL {
		if st.Kind == plugins.KindCall || strings.EqualFold(plugins.FirstKeyword(st.SQL), "EXECUTE") {
			// It may create temporary tables of names cached later.
			session(st).temps.opaque()
		}
		return plugins.Continue
	}
	a, err := p.analyze(st)
	if err != nil {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, err.Error()))
	}
	if st.Command != plugins.ComStmtPrepare {
		session(st).temps.expect(a)
	}
	if a.Effect == plugins.EffectCache || a.Effect == plugins.EffectNoCache {
		if st.Command == plugins.ComStmtPrepare {
			return plugins.Continue // the execution is what acts
		}
		return p.admin(st, a)
	}
	if a.Programs || a.Effect == plugins.EffectDDL || a.Effect == plugins.EffectUnknown {
		p.forgetIndirect() // (it may create or drop a view, a trigger or a stored function)
	}
	if st.Command == plugins.ComStmtPrepare {
		return plugins.Continue
	}
	si := session(st)
	if a.Accounts || a.Effect == plugins.EffectUnknown {
		si.privilegesMayChange = true
		si.accountsMayChange = si.accountsMayChange || a.Accounts
	}
	var ids []lease.TableID
	all := false
	written := leaseIDs(a.Written)
	switch {
	case a.Effect == plugins.EffectUnknown:
		p.conservative(a.Why)
		ids, all = p.cachedIDs(), true
	case len(written) == 0:
	case p.writesElsewhere(written):
		ids, all = p.cachedIDs(), true // through a view or a trigger
	default:
		for _, id := range written {
			if p.table(id) != nil {
				ids = append(ids, id)
			}
		}
	}
	altered, dropped := p.ddlOnCached(si, a)
	ids = appendIDs(ids, altered...)
	si.altering = len(altered) > 0
	p.predicts.record(a.Stmts, ids, all)
	si.dropping = append(si.dropping[:0], dropped...)
	if len(ids) > 0 {
		p.beginWrite(st, ids)
		failpoint.Panic("cache.write.intent", st.SQL)
	}
	return plugins.Continue
}

// ddlOnCached names the cached tables whose definition a request changes
// (other than by adding indexes) and, of those, the ones it drops or
// renames away. A DDL statement on a cached table runs: like a write, it
// holds an intent on the table, so its reads go to the backend until the
// statement has ended and the copy is loaded again (with the new
// definition); a table dropped or renamed leaves the cache. A session's
// temporary table of the name hides the cached one.
func (p *Plugin) ddlOnCached(si *sessionInfo, a plugins.Analysis) (altered, dropped []lease.TableID) {
	if a.IndexOnly || len(a.Targets) == 0 && a.DropSchema == "" {
		// An index changes no row and no column: the copies stay exact
		// (see ExpectSwap for an online ADD INDEX's swap).
		return nil, nil
	}
	cached := func(id lease.TableID) bool { return p.table(id) != nil && !si.temps.has(id) }
	for _, id := range leaseIDs(a.Targets) {
		if cached(id) {
			altered = appendIDs(altered, id)
		}
	}
	for _, id := range leaseIDs(a.Dropped) {
		if cached(id) {
			dropped = appendIDs(dropped, id)
		}
	}
	if a.DropSchema != "" {
		for _, id := range p.cachedIDs() {
			if strings.EqualFold(id.Schema, a.DropSchema) {
				altered, dropped = appendIDs(altered, id), appendIDs(dropped, id)
			}
		}
	}
	return altered, dropped
}

func appendIDs(list []lease.TableID, ids ...lease.TableID) []lease.TableID {
	for _, id := range ids {
		if !slices.Contains(list, id) {
			list = append(list, id)
		}
	}
	return list
}

// analyze is the statement's analysis, remembered by statement shape: the
// literals of a statement never change which tables it writes.
func (p *Plugin) analyze(st *plugins.Statement) (plugins.Analysis, error) {
	if st.Session == nil || len(st.SQL) > p.maxPlannedText {
		return st.Analysis() // (a long text's shape is not remembered: see memory.go)
	}
	var key planKey
	if st.Command == plugins.ComStmtExecute {
		key = planKey{db: st.DB, text: st.SQL} // the prepared text: its markers are its literals
	} else {
		si := session(st)
		tmpl, lits, ok := eval.TemplateOf(st.SQL, si.tmpl, si.lits)
		si.tmpl, si.lits = tmpl, lits
		if !ok {
			return st.Analysis()
		}
		key = planKey{db: st.DB, text: unsafe.String(unsafe.SliceData(tmpl), len(tmpl))}
	}
	if a, ok := p.effects.Get(key); ok {
		return a, nil
	}
	a, err := st.Analysis()
	if err == nil && !a.PerRequest {
		k := planKey{db: strings.Clone(key.db), text: strings.Clone(key.text)}
		p.effects.Add(k, a, effectCost(k, a))
	}
	return a, err
}

// leaseIDs names the tables of an analysis as the lease manager does.
func leaseIDs(ts []plugins.TableID) []lease.TableID {
	if len(ts) == 0 {
		return nil
	}
	ids := make([]lease.TableID, len(ts))
	for i, t := range ts {
		ids[i] = lease.TableID(t)
	}
	return ids
}

// collectTables lists the tables node names (see plugins.TablesIn).
func collectTables(node ast.Node, db string) []lease.TableID {
	return leaseIDs(plugins.TablesIn(node, db))
}

// beginWrite opens an intent on ids for the session's statement. On one
// node it cannot fail; a cluster may have to pass the write on unguarded
// (and invalidate afterwards), never refuse it.
func (p *Plugin) beginWrite(st *plugins.Statement, ids []lease.TableID) {
	conn := st.ConnID
	// Within a transaction, its later reads of these tables must see its
	// own writes: they go to the backend until it ends. (A write that
	// starts a transaction needs no pin: its intent, held until the
	// transaction ends, keeps the tables off memory for everyone.)
	if st.InTx {
		session(st).pinToBackend(ids)
	}
	start := time.Now()
	in, err := p.leases.BeginWrite(context.Background(), ids...)
	if err == nil {
		// What a write of a cached table costs over an uncached one: the
		// advisor's write penalty.
		p.intentNanos.Add(uint64(time.Since(start)))
		p.intents.Add(1)
	}
	hw := heldWrite{in: in}
	if err != nil {
		// The write goes on unguarded. This proxy keeps off the tables
		// until it has been answered, and bumps their versions both now
		// (for the other proxies, as soon as the cluster can commit) and
		// after it: a bump that commits while the write is still on its
		// way must not let a copy loaded before the write land be served
		// after it.
		p.log.Warn("cache: write intent failed; the write goes on unguarded and the tables are invalidated before and after it", "tables", ids, "err", err)
		for _, id := range ids {
			if ts := p.table(id); ts != nil {
				ts.unguarded.Add(1)
				ts.epoch.Add(1)
				hw.unguarded = append(hw.unguarded, ts)
			}
			p.leases.Invalidate(id)
		}
	}
	p.heldMu.Lock()
	p.held[conn] = append(p.held[conn], hw)
	p.heldMu.Unlock()
}

// OnResult implements plugins.StatementObserver: a session's write intents
// end with the statement, or with its transaction.
func (p *Plugin) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	failpoint.Panic("cache.result", st.SQL) // (a write's intent is still open here)
	if si, ok := st.Session.Get(sessionKey{}).(*sessionInfo); ok {
		si.serve.answer = rowsAnswer{} // answered or not, it refers to a snapshot
		si.trimScratch()
		p.resultsAfter(si, st, out)
		if si.pending != nil {
			if out.Source == plugins.FromBackend && out.Err == nil {
				p.learn(si)
			}
			si.pending = nil
		}
		if settingsChanged(st.Kind) {
			si.known = false
		}
		if out.Source == plugins.FromBackend && len(si.fresh) > 0 && si.pinSeq == st.Tx.Seq() {
			si.pinToBackend(si.fresh) // (see sessionInfo.fresh; a transaction that ended keeps no pins)
		}
		si.fresh = si.fresh[:0]
		si.followTx(st.Tx)
		if out.Status&mysql.SERVER_STATUS_IN_TRANS != 0 && out.Source == plugins.FromBackend && mayTakeSnapshot(st) {
			p.pinUnreadToBackend(si)
		}
		si.temps.answered(out.Err == nil)
		if si.privilegesMayChange {
			// After the backend has answered: a shape learned while the
			// change was on its way is learned again.
			si.privilegesMayChange = false
			p.leases.Invalidate(privilegesID)
			if si.accountsMayChange {
				si.accountsMayChange = false
				p.leases.Invalidate(accountsID)
			}
		}
		si.counts.answeredBy(st, out)
		si.afterBackend(st, out)
		if len(si.dropping) > 0 {
			p.afterDrop(si.dropping, out)
			si.dropping = si.dropping[:0]
		}
		if si.altering {
			// The table's columns may have changed: plans made on the old
			// ones, or refused for a column it lacked, are made again.
			si.altering = false
			p.forgetPlans()
		}
	}
	if out.Status&mysql.SERVER_STATUS_IN_TRANS != 0 {
		return
	}
	p.endWrites(st.ConnID)
}

// afterDrop follows a request that drops or renames away cached tables:
// once it has run without error they leave the cache; if it failed, it
// may have dropped some of them before its error, so they are loaded
// again, and a load that finds a table gone takes it out of the cache
// (see loadFailed).
func (p *Plugin) afterDrop(ids []lease.TableID, out *plugins.Outcome) {
	for _, id := range ids {
		switch {
		case out.Source != plugins.FromBackend:
		case out.Err == nil:
			p.tableGone(id, "dropped or renamed through the proxy")
		default:
			p.requestLoad(id)
		}
	}
}

// tableGone takes a cached table that was dropped or renamed out of the
// cache, on every proxy: its name may next hold another table, which is
// not cached. tableproxy.cached_tables shows it as dropped until it is
// cached again.
func (p *Plugin) tableGone(id lease.TableID, why string) {
	if p.table(id) == nil {
		return
	}
	if _, err := p.catalog.Delete(id); err != nil {
		p.log.Error("cache: could not take a dropped table out of the catalog; its reads go to the backend", "table", id.String(), "err", err)
		p.leases.Invalidate(id)
		return
	}
	p.removeTable(id)
	p.goneMu.Lock()
	if p.gone == nil {
		p.gone = map[lease.TableID]goneTable{}
	}
	p.gone[id] = goneTable{why: why, at: time.Now()}
	for old := range p.gone {
		if len(p.gone) <= maxGone {
			break
		}
		delete(p.gone, old) // (any one: the list only informs)
	}
	p.goneMu.Unlock()
	p.log.Info("cache: table no longer cached: it was dropped or renamed", "table", id.String(), "how", why)
}

// goneTable is a cached table that was dropped or renamed, as
// tableproxy.cached_tables shows it.
type goneTable struct {
	why string
	at  time.Time
}

// maxGone bounds the dropped tables remembered for cached_tables.
const maxGone = 100

// OnConn implements plugins.ConnObserver: a session that ends, or whose
// state is reset, ends its transaction, and so its intents.
func (p *Plugin) OnConn(ev plugins.ConnEvent) {
	if ev.Kind == plugins.ConnClosed || ev.Kind == plugins.ConnReset {
		p.endWrites(ev.ConnID)
	}
}

func (p *Plugin) endWrites(conn uint32) {
	p.heldMu.Lock()
	ins := p.held[conn]
	if len(ins) == 0 {
		p.heldMu.Unlock()
		return
	}
	delete(p.held, conn)
	p.heldMu.Unlock()
	for _, hw := range ins {
		hw.in.End() // (nil for an unguarded write: a no-op)
		for _, ts := range hw.unguarded {
			id := ts.entry.ID()
			p.leases.Invalidate(id)
			ts.epoch.Add(1) // before the count goes down and lets loads start
			if ts.unguarded.Add(-1) == 0 {
				p.requestLoad(id)
			}
		}
	}
}

// requestLoad queues a (re)load of id, once however often it is asked.
func (p *Plugin) requestLoad(id lease.TableID) {
	ts := p.table(id)
	if ts == nil || !ts.pending.CompareAndSwap(false, true) {
		return
	}
	select {
	case p.loads <- id:
	default:
		ts.pending.Store(false) // queue full: the next version change asks again
	}
}

// retryLoad asks for a load of ts again after wait (once, however often
// it is called meanwhile).
func (p *Plugin) retryLoad(ts *tableState, wait time.Duration) {
	if !ts.retryArmed.CompareAndSwap(false, true) {
		return
	}
	id := ts.entry.ID()
	time.AfterFunc(wait, func() {
		ts.retryArmed.Store(false)
		p.requestLoad(id)
	})
}

// loader loads tables one at a time, so loading never competes with
// itself for the backend.
func (p *Plugin) loader() {
	defer p.loaderWG.Done()
	for {
		select {
		case <-p.stop:
			return
		case id := <-p.loads:
			p.load(id)
		}
	}
}

func (p *Plugin) load(id lease.TableID) {
	ts := p.table(id)
	if ts == nil {
		return
	}
	ts.pending.Store(false)
	epoch := ts.epoch.Load() // before servable: see tableState.epoch
	v, ok := ts.servable()
	if !ok {
		return // a write is in flight; its end bumps the version and asks again
	}
	old := ts.snap.Load()
	if old != nil && old.Version == v && old.Epoch == epoch {
		return
	}
	if old != nil && weak.Make(old) != ts.judged {
		ts.judged = weak.Make(old)
		if ts.hits.Load() == ts.loadedHits {
			ts.wasted++
		} else {
			ts.wasted = 0
			ts.notBefore = time.Time{}
		}
	}
	if wait := time.Until(ts.notBefore); wait > 0 {
		p.retryLoad(ts, wait)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.opts.LoadTimeout))
	defer cancel()
	conn, err := p.backend.Connect(ctx, ts.entry.CachedBy, "")
	if err != nil {
		p.loadFailed(ts, err)
		return
	}
	defer conn.Close()
	// The in-memory form may cost up to twice the data it holds.
	limit, budgeted := p.loadLimit(id)
	s, err := load.Snapshot(ctx, conn, id, v, limit, p.colls)
	if err != nil {
		if !p.loadOverBudget(ts, err, budgeted) {
			p.loadFailed(ts, err)
		}
		return
	}
	if p.table(id) != ts {
		return // NOCACHE while loading
	}
	s.Epoch = epoch
	ts.loadedHits = ts.hits.Load()
	ts.awaitsRoom.Store(false)
	ts.snap.Store(s)
	if s.Bytes >= returnAfterLoad {
		// Go's heap would keep what the load freed (the copy it
		// replaced, its chunks) and grow into it again only at its own
		// pace: a large table would cost twice its size in memory. A
		// collection of a heap this size takes milliseconds; a load of
		// it, a hundred or more.
		debug.FreeOSMemory()
	}
	ts.notBefore = time.Now().Add(loadBackoff(s.LoadDuration, ts.wasted))
	ts.lastErr.Store(nil)
	p.log.Info("cache: table loaded", "table", id.String(), "version", s.Version, "rows", len(s.Rows),
		"bytes", s.Bytes, "took", s.LoadDuration)
	if s.Unchecked != "" && !p.warnedUnchecked.Swap(true) {
		p.log.Warn("cache: a copy loaded in the moment between a write's entry in the binary log and its commit would miss it until the next write",
			"table", id.String(), "why", s.Unchecked)
	}
}

func (p *Plugin) loadFailed(ts *tableState, err error) {
	msg := err.Error()
	ts.lastErr.Store(&msg)
	ts.snap.Store(nil)
	var me *mysql.MyError
	if errors.As(err, &me) && (me.Code == mysql.ER_TABLE_DEF_CHANGED || me.Code == mysql.ER_LOCK_WAIT_TIMEOUT || me.Code == mysql.ER_LOCK_DEADLOCK) {
		// A DDL on the table ended between the load's snapshot and its
		// read (1412), or a lock held it up: try again in a moment, as
		// the backend asks.
		p.log.Debug("cache: table load to be tried again", "table", ts.entry.ID().String(), "err", me.Error())
		p.retryLoad(ts, 100*time.Millisecond)
		return
	}
	var noTable *load.ErrNoTable
	if errors.As(err, &noTable) {
		p.tableGone(ts.entry.ID(), "the table no longer exists on the backend")
		return
	}
	var tooLarge *load.ErrTooLarge
	if errors.As(err, &tooLarge) {
		// The table grew past the cap since it was cached: stop caching it
		// (writes are never refused on the cache's account).
		id := ts.entry.ID()
		p.log.Warn("cache: table grew past the size cap; no longer cached", "table", id.String(), "err", err)
		if _, derr := p.catalog.Delete(id); derr != nil {
			p.log.Error("cache: could not drop an oversized table from the catalog", "table", id.String(), "err", derr)
		}
		p.removeTable(id)
		p.dropped.Add(1)
		return
	}
	p.log.Warn("cache: table load failed; its reads go to the backend", "table", ts.entry.ID().String(), "err", err)
}

// registerMetrics exposes the cache's counters.
func (p *Plugin) registerMetrics(reg prometheus.Registerer) {
	sum := func(f func(*tableState) uint64) func() float64 {
		return func() float64 {
			var n uint64
			for _, ts := range p.cachedTables() {
				n += f(ts)
			}
			return float64(n)
		}
	}
	for _, c := range append([]prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_hits_total",
			Help: "Reads of cached tables answered from memory (tables cached now)."}, sum(func(ts *tableState) uint64 { return ts.hits.Load() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_pass_throughs_total",
			Help: "Reads of cached tables that went to the backend (tables cached now)."}, sum(func(ts *tableState) uint64 { return ts.passes.Load() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_cache_tables",
			Help: "Tables cached."}, func() float64 { return float64(len(p.cachedTables())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_missed_writes_total",
			Help: "Writes of cached tables, seen in the binary log, by statements sent through this proxy whose account did not name the table (a bug: please report it)."},
			func() float64 { return float64(p.predicts.missed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_tables_dropped_total",
			Help: "Tables no longer cached because they grew past max_table_size."}, func() float64 { return float64(p.dropped.Load()) }),
		newTableMetrics(p),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_write_intents_total",
			Help: "Write intents opened on cached tables (each a Raft commit and a round of lease revocations in a cluster)."},
			func() float64 { return float64(p.intents.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_write_intent_seconds_total",
			Help: "Time spent opening write intents (divide by tableproxy_cache_write_intents_total for the mean)."},
			func() float64 { return float64(p.intentNanos.Load()) / 1e9 }),
	}, append(append(append(p.passReasonMetrics(), p.conservativeMetrics()...), p.resultMetrics()...), p.budgetMetrics()...)...) {
		if err := reg.Register(c); err != nil {
			p.log.Warn("cache: metric not registered", "err", err)
		}
	}
}

// passReasonMetrics are the counters of statements sent to the backend,
// one per reason (label reason: PassReason's label), each made once so
// that counting one is an atomic add.
func (p *Plugin) passReasonMetrics() []prometheus.Collector {
	var out []prometheus.Collector
	for _, r := range eval.PassReasons() {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_passes_by_reason_total",
			Help:        "Statements the cache plugin sent to the backend instead of answering them from memory, by reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()}},
			func() float64 { return float64(p.passReasons[r].Load()) }))
	}
	return out
}

// conservativeMetrics are the counters of requests whose effect could not
// be named, so that they counted as writes of every cached table, by
// reason (plugins.Conservative).
func (p *Plugin) conservativeMetrics() []prometheus.Collector {
	var out []prometheus.Collector
	for _, r := range plugins.ConservativeReasons() {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_conservative_writes_total",
			Help:        "Requests whose effect the proxy could not name, taken as writes of every cached table, by reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()}},
			func() float64 { return float64(p.conservatives[r].Load()) }))
	}
	return out
}

// conservative counts a request taken as a write of every cached table.
func (p *Plugin) conservative(why plugins.Conservative) {
	if int(why) >= plugins.NumConservative {
		why = plugins.WhyOther
	}
	p.conservatives[why].Add(1)
}

// admin runs ALTER TABLE ... CACHE / NOCACHE.
func (p *Plugin) admin(st *plugins.Statement, a plugins.Analysis) plugins.Action {
	if !st.Admin {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
			"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation"))
	}
	id := lease.TableID(a.Tables[0])
	if id.Schema == "" {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_NO_DB_ERROR, "No database selected"))
	}
	user := st.User
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		var err *mysql.MyError
		if a.Effect == plugins.EffectCache {
			err = p.cacheTable(user, id)
		} else {
			err = p.nocacheTable(user, id)
		}
		if err != nil {
			return w.WriteError(err)
		}
		return w.WriteResult(nil)
	}))
}

func (p *Plugin) cacheTable(user string, id lease.TableID) *mysql.MyError {
	if p.table(id) != nil {
		return nil // already cached: as TiDB, a no-op
	}
	p.goneMu.Lock()
	delete(p.gone, id) // (cached anew: no longer listed as dropped)
	p.goneMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.backend.Connect(ctx, user, "")
	if err != nil {
		return backendError(err)
	}
	defer conn.Close()
	r, err := conn.Execute(`SELECT TABLE_TYPE, DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, id.Schema, id.Table)
	if err != nil {
		return backendError(err)
	}
	if r.RowNumber() == 0 {
		return mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", id.Schema, id.Table))
	}
	if typ := eval.ResultString(r, 0, 0); typ != "BASE TABLE" {
		return errUnsupported(strings.ToLower(typ))
	}
	size, _ := r.GetInt(0, 1)
	if size > p.maxBytes {
		// TiDB's words, and the sizes and the option.
		e := errUnsupported("table too large")
		e.Message += fmt.Sprintf(" (%s takes %s on the backend, more than the cache option max_table_size, %s)", id, mib(size), mib(p.maxBytes))
		return e
	}
	if err := p.overBudget(id, copyEstimate(size)); err != nil {
		return err
	}
	if pk, err := load.PrimaryKey(conn, id); err != nil {
		return backendError(err)
	} else if len(pk) == 0 {
		return errUnsupported("table without a primary key")
	}
	if why, err := load.UnservableShape(conn, id); err != nil {
		return backendError(err)
	} else if why != "" {
		return errUnsupported(why)
	}
	if !p.opts.AcceptStaleRisk {
		if why := binlogProblem(conn); why != "" {
			return mysql.NewError(mysql.ER_OPTION_PREVENTS_STATEMENT, "tableproxy cannot see writes that bypass it: "+why+
				"; set the cache option accept_stale_risk to cache anyway")
		}
	}
	e := Entry{Schema: id.Schema, Table: id.Table, CachedBy: user, Since: time.Now().UTC()}
	if err := p.catalog.Put(e); err != nil {
		return mysql.NewError(mysql.ER_ERROR_ON_WRITE, "tableproxy cache catalog: "+err.Error())
	}
	p.awaitAdded(id)
	p.log.Info("cache: table cached", "table", id.String(), "by", user)
	return nil
}

// addedWait bounds how long ALTER TABLE ... CACHE waits for this proxy to
// apply the entry it committed: a follower applies it with the leader's
// next append, within a CommitTimeout.
const addedWait = 2 * time.Second

// awaitAdded returns once the catalog's sync has added id here (pending
// until every proxy has learned of it: see learn.go), so that the statement
// that cached it is answered once this proxy treats the table as cached.
func (p *Plugin) awaitAdded(id lease.TableID) {
	deadline := time.Now().Add(addedWait)
	for p.table(id) == nil && time.Now().Before(deadline) {
		p.syncCatalog()
		if p.table(id) == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (p *Plugin) nocacheTable(user string, id lease.TableID) *mysql.MyError {
	if p.table(id) == nil {
		return nil // not cached: as TiDB, a no-op
	}
	if _, err := p.catalog.Delete(id); err != nil {
		return mysql.NewError(mysql.ER_ERROR_ON_WRITE, "tableproxy cache catalog: "+err.Error())
	}
	p.removeTable(id)
	p.log.Info("cache: table no longer cached", "table", id.String(), "by", user)
	return nil
}

// binlogProblem says why the backend's binary log cannot show every write
// that bypasses the proxy, or "" when it can.
func binlogProblem(conn interface {
	Execute(string, ...any) (*mysql.Result, error)
}) string {
	r, err := conn.Execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
	if err != nil {
		return "cannot read the binary log settings: " + err.Error()
	}
	defer r.Close()
	logBin, _ := r.GetInt(0, 0)
	format := eval.ResultString(r, 0, 1)
	image := eval.ResultString(r, 0, 2)
	switch {
	case logBin != 1:
		return "the backend's binary log is off (log_bin=OFF)"
	case format != "ROW":
		return "the backend's binary log is not in ROW format (binlog_format=" + format + ")"
	case image != "FULL":
		return "the backend's binary log lacks full row images (binlog_row_image=" + image + ")"
	}
	return ""
}

func backendError(err error) *mysql.MyError {
	if me, ok := err.(*mysql.MyError); ok {
		return me
	}
	return mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy cache: "+err.Error())
}

// Status is one cached table as the tableproxy.cached_tables view shows it.
type Status struct {
	Schema, Table string
	State         string // loading, ready, stale, failed, dropped
	Rows          int
	Bytes         int64
	Version       lease.Version
	LoadedAt      time.Time
	LoadDuration  time.Duration
	Hits, Passes  uint64
	ResultHits    uint64 // of Hits, those answered by the result cache
	MissedWrites  uint64 // writes the account of statements sent through this proxy missed (predictions.go)
	Error         string
	Invalidation  string // how writes that bypass the proxy are seen
	StaleReason   string // why a loaded copy is not answered from memory now
}

// Tables reports every cached table's state.
func (p *Plugin) Tables() []Status {
	var out []Status
	for _, e := range p.catalog.List() {
		ts := p.table(e.ID())
		if ts == nil {
			continue
		}
		st := Status{Schema: e.Schema, Table: e.Table, State: "loading", Version: ts.lease.Version(),
			Hits: ts.hits.Load(), Passes: ts.passes.Load(), ResultHits: ts.resultHits.Load(), Invalidation: p.watch.Load().status(),
			MissedWrites: ts.missed.Load()}
		if p.opts.AcceptStaleRisk && st.Invalidation != "binlog" {
			st.Invalidation += " (stale risk accepted)"
		}
		if msg := ts.lastErr.Load(); msg != nil {
			st.State, st.Error = "failed", *msg
		}
		if s := ts.snap.Load(); s != nil {
			st.Rows, st.Bytes, st.LoadedAt, st.LoadDuration = len(s.Rows), s.Bytes, s.LoadedAt, s.LoadDuration
			if _, ok := p.Servable(e.ID()); ok {
				st.State = "ready"
			} else {
				st.State, st.StaleReason = "stale", p.whyStale(ts, s)
			}
		}
		out = append(out, st)
	}
	p.goneMu.Lock()
	for id, g := range p.gone {
		if p.table(id) == nil {
			out = append(out, Status{Schema: id.Schema, Table: id.Table, State: "dropped", Error: g.why, LoadedAt: g.at})
		}
	}
	p.goneMu.Unlock()
	return out
}

// whyStale says which of Servable's conditions keeps s, ts's loaded copy,
// from being answered from memory, in Servable's order (the state may move
// between Servable and this: an empty answer means it just did).
func (p *Plugin) whyStale(ts *tableState, s *eval.Snapshot) string {
	if ts.catalogPending.Load() {
		return "newly cached: not every proxy of the cluster has learned yet that it is cached"
	}
	if !p.bypassWritesVisible() {
		return "writes that bypass the proxy are not being seen: " + p.watch.Load().status()
	}
	if why := ts.lease.Unservable(); why != "" {
		return why
	}
	if n := ts.unguarded.Load(); n != 0 {
		return fmt.Sprintf("%d write(s) to it that no intent covers in flight", n)
	}
	if v := ts.lease.Version(); s.Version != v {
		return fmt.Sprintf("the copy is of version %d; version %d is to be loaded", s.Version, v)
	}
	if s.Epoch != ts.epoch.Load() {
		return "the copy was loaded across a write that no intent covered; it is to be loaded again"
	}
	return ""
}

// invalidateAll bumps the version of every cached table, and of the
// backend's privileges and accounts.
func (p *Plugin) invalidateAll() {
	for _, id := range p.cachedIDs() {
		p.leases.Invalidate(id)
	}
	// A GRANT or REVOKE may be among what was missed, too.
	p.leases.Invalidate(privilegesID)
	p.leases.Invalidate(accountsID)
}
