package cache

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/tidb/pkg/parser"

	"tableproxy/cache/eval"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// A write that escapes the account. The binary log is the record of what
// was written: MariaDB logs before each statement's row events the text of
// the statement (Annotate_rows). The cache remembers, by shape (the text
// with its literals as '?'), which cached tables the account of each
// statement this proxy's sessions sent said it may write (the intents it
// opened). A row event on a cached table whose statement has a shape this
// proxy sent, and whose account did not name that table, is a missed
// prediction: a bug of the account. It is counted
// (tableproxy_cache_missed_writes_total, cached_tables.missed_writes) and
// logged with the statement's digest; the table is bumped as for any write
// the log shows. A statement of a shape this proxy never sent is a write
// that bypasses it, as before.
//
// What it cannot see: a statement of a shape another proxy of a cluster
// sent (only the proxy that follows the log checks, against its own
// sessions), and a backend that does not log statement texts
// (binlog_annotate_row_events off, or MySQL, whose Rows_query events are
// off by default).

// maxPredictions bounds the shapes remembered; the oldest go first.
const maxPredictions = 4096

// predictionTTL is how long a shape's account is kept for the log to
// catch up with.
const predictionTTL = time.Minute

// predictions are the accounts of the shapes this proxy's sessions sent.
type predictions struct {
	mu      sync.Mutex
	byShape map[string]prediction
	ring    []string // shapes in the order stored, for eviction
	next    int
	missed  atomic.Uint64
	lastLog atomic.Int64 // UnixNano of the last log line (one a second)
}

// prediction is what the account said a shape writes of the cached
// tables: all of them, or tables.
type prediction struct {
	tables []lease.TableID
	all    bool
	at     time.Time
}

// record stores the account of the statements of one request: each
// statement's shape, with the cached tables the request opened intents on
// (all: every cached table).
func (ps *predictions) record(stmts []plugins.StmtInfo, ids []lease.TableID, all bool) {
	now := time.Now()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byShape == nil {
		ps.byShape = map[string]prediction{}
		ps.ring = make([]string, maxPredictions)
	}
	for _, s := range stmts {
		if s.Dynamic || s.SQL == "" {
			continue
		}
		shape := shapeOf(s.SQL)
		if _, ok := ps.byShape[shape]; !ok {
			if old := ps.ring[ps.next]; old != "" {
				delete(ps.byShape, old)
			}
			ps.ring[ps.next] = shape
			ps.next = (ps.next + 1) % maxPredictions
		}
		ps.byShape[shape] = prediction{tables: slices.Clone(ids), all: all, at: now}
	}
}

// missed reports whether a write of id by the statement text, seen in the
// log, escaped the account of a statement this proxy sent.
func (ps *predictions) missedBy(text string, id lease.TableID) bool {
	shape := shapeOf(text)
	ps.mu.Lock()
	pr, ok := ps.byShape[shape]
	ps.mu.Unlock()
	if !ok || time.Since(pr.at) > predictionTTL || pr.all {
		return false
	}
	return !slices.Contains(pr.tables, id)
}

// shapeOf is a statement's text with its literals as '?' (the key the
// account is kept by), or the text when it has none to replace.
func shapeOf(text string) string {
	tmpl, _, ok := eval.TemplateOf(text, nil, nil)
	if !ok {
		return text
	}
	return string(tmpl)
}

// noteMissed counts and logs a write the account missed.
func (ps *predictions) noteMissed(log *slog.Logger, id lease.TableID, text string) {
	ps.missed.Add(1)
	now := time.Now().UnixNano()
	if last := ps.lastLog.Load(); now-last < int64(time.Second) || !ps.lastLog.CompareAndSwap(last, now) {
		return
	}
	_, d := parser.NormalizeDigest(text)
	log.Error("cache: a statement sent through this proxy wrote a cached table its account did not name; the table is reloaded (please report it)",
		"table", id.String(), "digest", d.String())
}
