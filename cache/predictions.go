package cache

import (
	"log/slog"
	"slices"
	"strings"
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
// with its literals as '?') and the database it was sent under, which
// cached tables the account of each statement this proxy's sessions sent
// said it may write (the intents it opened). A row event on a cached table
// whose statement has a shape this proxy sent, and whose account did not
// name that table, is a missed prediction: a bug of the account. It is
// counted (tableproxy_cache_missed_writes_total,
// cached_tables.missed_writes) and logged with the statement's digest; the
// table is bumped as for any write the log shows. A statement of a shape
// this proxy never sent is a write that bypasses it, as before.
//
// The same text under another database writes another table, and the
// log does not say which database a statement ran under: a shape is judged
// by its sends under the written table's database, or that name it. A
// statement listed by PREPARE runs at EXECUTE, and is judged by the
// EXECUTE's account.
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

// maxDBsPerShape bounds the default databases one shape is remembered
// under; a shape sent under more is judged under none (it names no
// particular table).
const maxDBsPerShape = 8

// predictions are the accounts of the shapes this proxy's sessions sent.
type predictions struct {
	mu      sync.Mutex
	byShape map[string]*shapeSends
	ring    []string // shapes in the order stored, for eviction
	next    int
	missed  atomic.Uint64
	lastLog atomic.Int64 // UnixNano of the last log line (one a second)
}

// shapeSends is what the accounts of one shape said, by the default
// database it was sent under: the log does not say which database a
// statement's unqualified names resolved against, and the same text sent
// under another database writes another table. crowded: sent under more
// than maxDBsPerShape databases.
type shapeSends struct {
	byDB    map[string]*prediction
	crowded bool
}

// prediction is what the accounts of a shape sent under one database said
// it writes of the cached tables, within predictionTTL of the last send:
// the union of their tables, or all of them.
type prediction struct {
	tables []lease.TableID
	all    bool
	at     time.Time
}

// record stores the account of the statements of one request: each
// statement's shape, under its default database, with the cached tables
// the request opened intents on (all: every cached table).
func (ps *predictions) record(stmts []plugins.StmtInfo, ids []lease.TableID, all bool) {
	now := time.Now()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byShape == nil {
		ps.byShape = map[string]*shapeSends{}
		ps.ring = make([]string, maxPredictions)
	}
	for _, s := range stmts {
		if s.Dynamic || s.Prepared || s.SQL == "" {
			continue
		}
		shape := shapeOf(s.SQL)
		ss := ps.byShape[shape]
		if ss == nil {
			if old := ps.ring[ps.next]; old != "" {
				delete(ps.byShape, old)
			}
			ps.ring[ps.next] = shape
			ps.next = (ps.next + 1) % maxPredictions
			ss = &shapeSends{byDB: map[string]*prediction{}}
			ps.byShape[shape] = ss
		}
		pr := ss.byDB[s.DB]
		switch {
		case pr == nil && len(ss.byDB) >= maxDBsPerShape:
			ss.crowded = true
			continue
		case pr == nil || now.Sub(pr.at) > predictionTTL:
			pr = &prediction{}
			ss.byDB[s.DB] = pr
		}
		// Union: any send of the shape within the TTL may be the one the
		// log shows.
		for _, id := range ids {
			if !slices.Contains(pr.tables, id) {
				pr.tables = append(pr.tables, id)
			}
		}
		pr.all = pr.all || all
		pr.at = now
	}
}

// missedBy reports whether a write of id by the statement text, seen in
// the log, escaped the account of a statement this proxy sent. It judges
// by the sends of the shape that can have written id: those under id's
// database, and those whose text names that database. None: the write
// came from elsewhere (another client, a statement prepared from a
// variable), not a missed account.
func (ps *predictions) missedBy(text string, id lease.TableID) bool {
	shape := shapeOf(text)
	names := qualifies(shape, id.Schema)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ss := ps.byShape[shape]
	if ss == nil || ss.crowded {
		return false
	}
	judged := false
	for db, pr := range ss.byDB {
		if time.Since(pr.at) > predictionTTL || db != id.Schema && !names {
			continue
		}
		if pr.all || slices.Contains(pr.tables, id) {
			return false
		}
		judged = true
	}
	return judged
}

// qualifies reports whether text names schema as a qualifier (schema. or
// `schema`.).
func qualifies(text, schema string) bool {
	text, schema = strings.ToLower(text), strings.ToLower(schema)
	return strings.Contains(text, schema+".") || strings.Contains(text, "`"+schema+"`.")
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
