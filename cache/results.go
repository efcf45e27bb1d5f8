package cache

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/cache/eval"
	"tableproxy/cache/results"
	"tableproxy/configs"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// The result cache's use per statement: looking an answer up for a read
// the evaluator does not answer, recording the backend's answer, and
// storing it if the versions of its tables held meanwhile. The store, the
// eligibility of a statement and the key's parts are package
// cache/results' (whose doc says what can go wrong, and what stops it).

// pendingResult is a response being recorded, to be stored if its guard
// holds when it has arrived.
type pendingResult struct {
	key      string
	tables   []*tableState
	versions []lease.Version
	capture  plugins.Capture
}

// declined handles a SELECT the evaluator does not answer: from the result
// cache if it can, else by the backend (recording the answer when it may
// be stored). The reads of cached tables that reach the backend are
// counted as passes.
func (p *Plugin) declined(st *plugins.Statement, si *sessionInfo, shape *results.Shape, tables []lease.TableID) plugins.Action {
	a, hit := p.fromResults(st, si, shape)
	if !hit {
		p.countPassesOf(tables)
	}
	return a
}

// declinedWhy is declined for readWhy, with the reason it records for
// EXPLAIN LAST STATEMENT.
func (p *Plugin) declinedWhy(st *plugins.Statement, si *sessionInfo, ent *planEntry, why eval.Why) (plugins.Action, eval.Why) {
	a := p.declined(st, si, ent.results, ent.tables)
	if a.Verdict == plugins.Answer {
		return a, eval.Because(why.Reason, "answered from the result cache (not by the evaluator: "+why.Text+")")
	}
	return a, why
}

// fromResults answers st from the result cache (hit), or returns the
// action to send it on with: the shape's tables, the session, the key,
// then the store; a miss is recorded to be stored (recordResult).
func (p *Plugin) fromResults(st *plugins.Statement, si *sessionInfo, shape *results.Shape) (plugins.Action, bool) {
	rc := p.results
	if rc == nil || shape == nil {
		return plugins.Continue, false
	}
	if shape.Reparse {
		if st.Command != plugins.ComQuery {
			return plugins.Continue, false // the same text again
		}
		if shape = p.reparseShape(st); shape == nil {
			return plugins.Continue, false
		}
	}
	if p.queryLimited(st, si).Declined() || len(st.SQL) > p.maxPlannedText {
		// (A text longer than max_planned_text would be the key of its
		// answer: such statements are left to the backend; memory.go.)
		return plugins.Continue, false
	}
	si.usesTables = true
	tss, ok := p.resultTables(st, si, shape)
	if !ok {
		return plugins.Continue, false
	}
	rs := &si.rc
	si.usesTables = true
	if si.blocked(st).Declined() || !si.probe(st) || !rs.Probe(st) || !parsedAlike(st.SQL, si.sqlMode) {
		return plugins.Continue, false
	}
	if !st.InTx && !st.Tx.Autocommit() {
		// With autocommit off the read starts a transaction in the
		// backend, at the backend's newest data: as the evaluator, leave
		// it to the backend.
		return plugins.Continue, false
	}
	key, versions, ok := p.resultKey(st, si, shape, tss)
	rs.Key = key
	if !ok {
		return plugins.Continue, false
	}
	k := unsafe.String(unsafe.SliceData(key), len(key))
	if e, ok := rc.Store.Get(k); ok && e.Key == k {
		rc.Hits.Add(1)
		for _, ts := range tss {
			ts.hits.Add(1)
			ts.resultHits.Add(1)
		}
		return plugins.AnswerWith(plugins.ResponderFunc(e.Replay)), true
	}
	rc.Misses.Add(1)
	return p.recordResult(st, si, key, tss, versions), false
}

// resultTables are the states of the shape's tables, or false when one
// is not cached, or surely cannot answer st from memory now (the common
// case while the tables are written: the session checks and the key are
// skipped).
func (p *Plugin) resultTables(st *plugins.Statement, si *sessionInfo, shape *results.Shape) ([]*tableState, bool) {
	for _, id := range shape.Tables {
		if !p.mayServe(st, si, id) {
			return nil, false
		}
	}
	tss := make([]*tableState, len(shape.Tables))
	for i, id := range shape.Tables {
		if tss[i] = p.table(id); tss[i] == nil {
			return nil, false // reads a table that is not cached
		}
	}
	return tss, true
}

// resultKey is st's key in the result cache, built in the session's
// buffer: the statement and its session (results.Session's
// AppendStatementKey), then each table's name, generation, version and
// epoch as st reads it now; and those versions. ok is false when the
// statement cannot be keyed, or a table cannot be read from memory now
// or could make a TIME column meet a date.
func (p *Plugin) resultKey(st *plugins.Statement, si *sessionInfo, shape *results.Shape, tss []*tableState) (key []byte, versions []lease.Version, ok bool) {
	if key, ok = si.rc.AppendStatementKey(si.rc.Key[:0], st, si.settings); !ok {
		return key, nil, false
	}
	versions = make([]lease.Version, len(shape.Tables))
	for i, id := range shape.Tables {
		ts := tss[i]
		var snap *eval.Snapshot
		if st.InTx {
			snap, ok = p.txSnapshot(st, si, id)
		} else {
			snap, ok = p.Servable(id)
		}
		if !ok || !results.TimeSafe(snap, shape) {
			return key, nil, false
		}
		versions[i] = snap.Version
		key = results.AppendKeyField(key, id.Schema)
		key = results.AppendKeyField(key, id.Table)
		key = binary.AppendUvarint(key, ts.gen)
		key = binary.AppendUvarint(key, uint64(snap.Version))
		key = binary.AppendUvarint(key, snap.Epoch) // see tableState.epoch
	}
	return key, versions, true
}

// recordResult sends a statement the result cache had no answer for to
// the backend, recording the answer to store under key if the tables are
// still at versions when it has arrived (resultsAfter). Only an answer
// read outside a transaction, at an isolation level that reads committed
// rows, stands for the tables' versions: inside one the backend answers
// from the transaction's read view, which may be older; READ UNCOMMITTED
// may see rows a transaction later rolls back; and after SET TRANSACTION
// the next statement's isolation is unknown.
func (p *Plugin) recordResult(st *plugins.Statement, si *sessionInfo, key []byte, tss []*tableState, versions []lease.Version) plugins.Action {
	if st.InTx || st.Tx.NextTxPending() {
		return plugins.Continue
	}
	if iso := st.Tx.Isolation(); strings.EqualFold(iso, "READ-UNCOMMITTED") || iso == "" {
		return plugins.Continue
	}
	pend := &pendingResult{key: string(key), tables: tss, versions: versions}
	pend.capture.Full, pend.capture.MaxBytes = true, p.results.MaxEntry
	si.resultPending = pend
	return plugins.Action{Verdict: plugins.Pass, Capture: &pend.capture}
}

// mayServe is false when table id surely cannot answer st from memory now:
// a write to it is in flight, or st's transaction pinned it while it could
// not be served (a table no longer cached is caught by the caller's next
// look-up). It changes nothing (txSnapshot pins).
func (p *Plugin) mayServe(st *plugins.Statement, si *sessionInfo, id lease.TableID) bool {
	if p.shadowed(st, si, id) {
		return false
	}
	if st.InTx {
		s, pinned := si.pins[id]
		return !pinned || s != nil
	}
	_, ok := p.Servable(id)
	return ok
}

// parsedAlike reports whether the backend reads sql as the parser that
// decided its eligibility did. MariaDB runs the text of /*M! ... */
// comments, which the parser skips (a NOW() there would go unseen); and
// the parser reads quotes and backslashes as the default SQL mode does.
func parsedAlike(sql, sqlMode string) bool {
	return !plugins.HidesCode(sql) && !strings.Contains(sqlMode, "ANSI_QUOTES") &&
		!strings.Contains(sqlMode, "NO_BACKSLASH_ESCAPES") && !strings.Contains(sqlMode, "ORACLE")
}

// reparseShape decides eligibility on a statement's full text.
func (p *Plugin) reparseShape(st *plugins.Statement) *results.Shape {
	stmts, err := st.Parsed()
	if err != nil || len(stmts) != 1 || plugins.CallsUserFunction(stmts[0]) {
		return nil
	}
	return results.ShapeOf(stmts[0], st.DB)
}

// resultsAfter is the result cache's part of OnResult: store the answer
// recorded for the session's statement if its guard holds, and forget the
// session's settings after a statement that may change them.
func (p *Plugin) resultsAfter(si *sessionInfo, st *plugins.Statement, out *plugins.Outcome) {
	rs := &si.rc
	if settingsChanged(st.Kind) || st.Command == plugins.ComQuery && !plugins.SingleStatement(st.SQL) {
		// A request of several statements may hide a SET behind a SELECT;
		// the evaluator's settings are part of the key too.
		rs.Known, rs.Failed = false, false
		si.known = false
	}
	pend := si.resultPending
	if pend == nil {
		return
	}
	si.resultPending = nil
	if p.storeResult(pend, out) {
		p.results.Stores.Add(1)
	} else {
		p.results.Rejects.Add(1)
	}
}

// storeResult stores a recorded answer if it is one complete result set
// without warnings, and every table it read is still servable at the
// version it had before the statement was sent.
func (p *Plugin) storeResult(pend *pendingResult, out *plugins.Outcome) bool {
	c := &pend.capture
	if out.Source != plugins.FromBackend || out.Err != nil || out.Warnings != 0 || c.Truncated || c.Results != 1 {
		return false
	}
	e, ok := results.NewEntry(pend.key, c)
	if !ok {
		return false
	}
	if !p.bypassWritesVisible() {
		return false
	}
	for i, ts := range pend.tables {
		if p.table(ts.entry.ID()) != ts {
			return false // NOCACHE (and maybe CACHE again) meanwhile
		}
		if v, ok := ts.servable(); !ok || v != pend.versions[i] {
			return false // written meanwhile, or being written now
		}
	}
	return p.results.Store.Set(e.Key, e, e.Cost())
}

// resultCacheSizes reads the result cache's budget and entry cap from the
// options (a budget of 0 turns the cache off).
func resultCacheSizes(opts Options) (budget, maxEntry int64, err error) {
	size, entry := opts.ResultCacheSize, opts.ResultCacheEntryMax
	if size == "" {
		size = "64MB"
	}
	if entry == "" {
		entry = "1MB"
	}
	if budget, err = configs.ParseByteSize(size); err != nil || budget < 0 {
		return 0, 0, fmt.Errorf("result_cache_size: %q: want a size like 64MB, or 0 for none", size)
	}
	// Packets are recorded whole; one of 16 MB or more would be split.
	if maxEntry, err = configs.ParseByteSize(entry); err != nil || maxEntry <= 0 || maxEntry >= int64(mysql.MaxPayloadLen) {
		return 0, 0, fmt.Errorf("result_cache_entry_max: %q: want a size like 1MB, below 16MB", entry)
	}
	return budget, maxEntry, nil
}

// newResultCacheFor builds the result cache the options ask for, or nil.
func newResultCacheFor(log *slog.Logger, opts Options) *results.Cache {
	budget, maxEntry, err := resultCacheSizes(opts)
	if err != nil || budget == 0 {
		return nil
	}
	rc, err := results.NewCache(budget, min(maxEntry, budget))
	if err != nil {
		log.Warn("cache: no result cache", "err", err)
		return nil
	}
	return rc
}

// resultMetrics are the result cache's counters.
func (p *Plugin) resultMetrics() []prometheus.Collector {
	rc := p.results
	if rc == nil {
		return nil
	}
	counter := func(name, help string, c *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(c.Load()) })
	}
	return []prometheus.Collector{
		counter("tableproxy_cache_result_hits_total", "Reads answered from the result cache.", &rc.Hits),
		counter("tableproxy_cache_result_misses_total", "Eligible reads the result cache had no answer for.", &rc.Misses),
		counter("tableproxy_cache_result_stores_total", "Answers stored in the result cache.", &rc.Stores),
		counter("tableproxy_cache_result_rejections_total",
			"Recorded answers not stored (warnings, errors, too large, a table written meanwhile, or no room).", &rc.Rejects),
	}
}
