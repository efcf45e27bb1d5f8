package digest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/binlog"
	"tableproxy/cache/eval"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Name is the plugin's name on the chain and in the configuration.
const Name = "digest"

// Defaults of the options.
const (
	defaultTop             = 1000
	defaultOthers          = 1000
	defaultMinCoveredShare = 50
	defaultMaxWriteShare   = 10
	// defaultWritePenalty is what a write of a cached table costs until
	// this proxy has measured it: a lone write intent in a three-node
	// cluster, p50 (BENCHMARKS.md).
	defaultWritePenalty = 1420 * time.Microsecond
	// maxSample bounds the statement text kept per digest for planning.
	maxSample = 4096
)

// Options are the plugin's section of the configuration.
type Options struct {
	// Top is how many digests are kept by count (N).
	Top *int `json:"top"`
	// Others is how many other digests are kept, least recently seen
	// forgotten first.
	Others *int `json:"others"`
	// MinCoveredShare: below this percentage of its reads answered from
	// memory, a table is "reads not covered".
	MinCoveredShare *int `json:"min_covered_share"`
	// MaxWriteShare: above this percentage of writes among its
	// statements, a table is "too many writes".
	MaxWriteShare *int `json:"max_write_share"`
	// WritePenalty is the cost of one write of a cached table until the
	// proxy has measured its own.
	WritePenalty *plugins.Duration `json:"write_penalty"`
}

type settings struct {
	top, others                    int
	minCoveredShare, maxWriteShare int
	writePenalty                   time.Duration
}

// CheckOptions checks the plugin's options as Open does, without opening
// it (tableproxy check-config).
func CheckOptions(raw plugins.Options) error {
	_, err := parseOptions(raw)
	return err
}

func parseOptions(raw plugins.Options) (settings, error) {
	var o Options
	if err := plugins.DecodeOptions(raw, &o); err != nil {
		return settings{}, err
	}
	s := settings{top: defaultTop, others: defaultOthers, minCoveredShare: defaultMinCoveredShare,
		maxWriteShare: defaultMaxWriteShare, writePenalty: defaultWritePenalty}
	for _, f := range []struct {
		name   string
		v      *int
		to     *int
		lo, hi int
	}{
		{"top", o.Top, &s.top, 1, 1 << 20},
		{"others", o.Others, &s.others, 0, 1 << 20},
		{"min_covered_share", o.MinCoveredShare, &s.minCoveredShare, 0, 100},
		{"max_write_share", o.MaxWriteShare, &s.maxWriteShare, 0, 100},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi {
			return settings{}, fmt.Errorf("%s: %d is not between %d and %d", f.name, *f.v, f.lo, f.hi)
		}
		*f.to = *f.v
	}
	if o.WritePenalty != nil {
		if *o.WritePenalty < 0 {
			return settings{}, fmt.Errorf("write_penalty: %v is negative", time.Duration(*o.WritePenalty))
		}
		s.writePenalty = time.Duration(*o.WritePenalty)
	}
	return s, nil
}

// Cache is what the digests and the advisor ask of the cache (package
// cache's Plugin): how it decided a statement, and how it would plan one
// were a table cached.
type Cache interface {
	Decision(st *plugins.Statement) (served, fromResults bool, reason eval.PassReason)
	PlanWhy(sql string, prepared bool, db string, lookup func(lease.TableID) *eval.Snapshot) eval.Why
	Definition(ctx context.Context, user string, id lease.TableID) (*eval.Snapshot, error)
	Copy(id lease.TableID) *eval.Snapshot
	IsCached(id lease.TableID) bool
	MaxTableSize() int64
	WriteCost() (mean time.Duration, n uint64)
}

// Plugin keeps the query digests (an observer of every statement) and
// answers ADMIN RESET QUERY DIGESTS and EXPLAIN CACHE.
type Plugin struct {
	log     *slog.Logger
	store   *Store
	set     settings
	node    string
	backend plugins.Backend
	user    string // the advisor reads the backend's catalog as this user
	now     func() time.Time

	cache     Cache // nil without the cache plugin
	cacheName string

	// bmu guards binlogWrites: rows events per table seen in the binary
	// log since the digests were reset.
	bmu          sync.Mutex
	binlogWrites map[plugins.TableID]uint64
	sub          *binlog.Subscription

	// templates are digests by statement template (see digestOf),
	// guarded by tmu.
	tmu       sync.RWMutex
	templates map[string]string

	dmu  sync.Mutex // guards defs
	defs map[lease.TableID]definition
}

// definition is a table's definition as the advisor last read it.
type definition struct {
	snap *eval.Snapshot
	err  error
	at   time.Time
}

// defTTL is how long a table's definition is reused by the advisor.
const defTTL = 30 * time.Second

// Open builds the plugin from its options: node is this proxy's id in its
// cluster, user the admin the advisor reads the backend's catalog as.
func Open(raw plugins.Options, env plugins.Env, node, user string) (*Plugin, error) {
	s, err := parseOptions(raw)
	if err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Plugin{log: log, set: s, node: node, backend: env.Backend, user: user, now: time.Now,
		binlogWrites: map[plugins.TableID]uint64{}, defs: map[lease.TableID]definition{}, templates: map[string]string{}}
	p.store = NewStore(s.top, s.others, p.now)
	// Writes that bypass the proxy are read from the binary log, as the
	// admin the advisor reads the catalog as; without one nothing could
	// read the log (and the stream would only fail and retry).
	if env.Binlog != nil && user != "" {
		p.sub = env.Binlog.Subscribe(binlog.Subscriber{Resume: true, User: user,
			Started: func(mysql.Position) {}, Event: p.binlogEvent, Broken: func(error) {}})
	}
	return p, nil
}

// SetCache connects the advisor to the cache (named name on the chain).
// Called once, before the proxy serves.
func (p *Plugin) SetCache(c Cache, name string) { p.cache, p.cacheName = c, name }

// Name implements plugins.Plugin.
func (p *Plugin) Name() string { return Name }

// Close implements plugins.Closer.
func (p *Plugin) Close() error {
	if p.sub != nil {
		p.sub.Close()
	}
	return nil
}

// binlogEvent counts the rows events of each table: the writes the
// advisor sees, whoever made them.
func (p *Plugin) binlogEvent(ev *replication.BinlogEvent, _ mysql.Position) error {
	re, ok := ev.Event.(*replication.RowsEvent)
	if !ok || re.Table == nil {
		return nil
	}
	id := plugins.TableID{Schema: string(re.Table.Schema), Table: string(re.Table.Table)}
	p.bmu.Lock()
	p.binlogWrites[id]++
	p.bmu.Unlock()
	return nil
}

// OnResult implements plugins.StatementObserver: the statement is counted
// under its digest. A statement the store knows costs the digest (which
// a prepared statement's executions share) and one locked map lookup.
func (p *Plugin) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	if st.Command == plugins.ComStmtPrepare {
		return // counted when executed
	}
	o := Observation{Duration: out.Duration, Rows: out.Rows, Affected: out.AffectedRows,
		Err: out.Err != nil, Where: -1, At: p.now()}
	switch {
	case out.Source == plugins.FromBackend:
		o.Where, o.Pass = atBackend, eval.NothingCached
		if p.cache != nil {
			_, _, o.Pass = p.cache.Decision(st)
		}
	case out.Source == plugins.FromPlugin && p.cache != nil && out.Plugin == p.cacheName &&
		(st.Kind == plugins.KindSelect || st.Kind == plugins.KindWith):
		if served, fromResults, _ := p.cache.Decision(st); served {
			o.Where = atMemory
			if fromResults {
				o.Where = atResults
			}
		}
	}
	k := Key{Digest: p.digestOf(st), Schema: st.DB, User: st.User}
	if !p.store.Record(k, &o) {
		p.store.Add(p.newEntry(st, k), &o)
	}
}

// maxTemplates bounds the memo of digests by template; when full it
// starts afresh (a few digests are then computed again). Templates longer
// than maxTemplateLen are not kept: the memo's keys are what clients send,
// and its memory is bounded by both (at most ~40 MB).
const (
	maxTemplates   = 10000
	maxTemplateLen = 4096
)

// templateScratch is a session's buffers for statement templates.
type templateScratch struct {
	tmpl []byte
	lits []eval.Literal
}

type scratchKey struct{}

// digestOf is st's digest. TiDB's normalization costs microseconds and
// allocates for every text-protocol statement (a prepared statement's is
// kept with it); the cache's template of a statement (its literals taken
// out, in a session buffer, without allocating) costs a fraction, and
// statements of one template share one digest, so the digest is computed
// once per template and then looked up.
func (p *Plugin) digestOf(st *plugins.Statement) string {
	if st.Command != plugins.ComQuery || st.Session == nil {
		return st.Digest()
	}
	sc, _ := st.Session.Get(scratchKey{}).(*templateScratch)
	if sc == nil {
		sc = &templateScratch{}
		st.Session.Set(scratchKey{}, sc)
	}
	if len(st.SQL) > maxTemplateLen {
		return st.Digest()
	}
	tmpl, lits, ok := eval.TemplateOf(st.SQL, sc.tmpl, sc.lits)
	sc.tmpl, sc.lits = tmpl, lits
	if !ok {
		return st.Digest()
	}
	p.tmu.RLock()
	d, hit := p.templates[string(tmpl)]
	p.tmu.RUnlock()
	if hit {
		return d
	}
	d = st.Digest()
	p.tmu.Lock()
	if len(p.templates) >= maxTemplates {
		clear(p.templates)
	}
	p.templates[string(tmpl)] = d
	p.tmu.Unlock()
	return d
}

// newEntry builds the entry of a digest seen for the first time: the
// strings copied (the statement's point into the session's buffers), and
// the tables it reads and writes.
func (p *Plugin) newEntry(st *plugins.Statement, k Key) *Entry {
	sample, text := st.SQL, st.Normalized()
	if len(sample) > maxSample {
		sample = sample[:maxSample]
	}
	if len(text) > maxSample {
		// (The normalized text holds no literal: cut anywhere.)
		text = text[:maxSample] + "..."
	}
	e := &Entry{Key: Key{Digest: strings.Clone(k.Digest), Schema: strings.Clone(k.Schema), User: strings.Clone(k.User)},
		Text: strings.Clone(text), Sample: strings.Clone(sample), Prepared: st.Command == plugins.ComStmtExecute}
	a, err := st.Analysis() // (parsed once per new digest; the cache may have parsed it already)
	if err != nil {
		return e
	}
	switch {
	case a.Effect == plugins.EffectNone && (st.Kind == plugins.KindSelect || st.Kind == plugins.KindWith):
		e.Reads = a.Named
	case a.Effect == plugins.EffectWrite:
		e.Writes = a.Tables
	}
	return e
}

// Reset forgets every digest and the binary log's counts.
func (p *Plugin) Reset() {
	p.store.Reset()
	p.bmu.Lock()
	p.binlogWrites = map[plugins.TableID]uint64{}
	p.bmu.Unlock()
}

// OnStatement implements plugins.StatementFilter: ADMIN RESET QUERY
// DIGESTS and EXPLAIN CACHE t.
func (p *Plugin) OnStatement(st *plugins.Statement) plugins.Action {
	switch st.Kind {
	case plugins.KindAdmin:
		if !isResetDigests(st.SQL) {
			return plugins.Continue
		}
		if st.Command == plugins.ComStmtPrepare {
			return plugins.RefuseWith(errNoPrepare())
		}
		if !st.Admin {
			return plugins.RefuseWith(errNotAdmin())
		}
		p.Reset()
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			return w.WriteResult(nil)
		}))
	case plugins.KindShow:
		name, ok := explainCacheTarget(st.SQL)
		if !ok {
			return plugins.Continue
		}
		if st.Command == plugins.ComStmtPrepare {
			return plugins.RefuseWith(errNoPrepare())
		}
		if !st.Admin {
			// It reads any table's size and definition as the admin the
			// advisor runs as, whatever the session's own grants.
			return plugins.RefuseWith(errNotAdmin())
		}
		return p.explainCache(st, name)
	}
	return plugins.Continue
}

func errNotAdmin() *mysql.MyError {
	return mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
		"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation")
}

func errNoPrepare() *mysql.MyError {
	return mysql.NewError(mysql.ER_UNSUPPORTED_PS, "This command is not supported in the prepared statement protocol yet")
}

// words splits a statement into its words, without a final ';'.
func words(sql string) []string {
	return strings.Fields(strings.TrimSuffix(strings.TrimSpace(sql), ";"))
}

// isResetDigests reports whether sql is ADMIN RESET QUERY DIGESTS.
func isResetDigests(sql string) bool {
	f := words(sql)
	return len(f) == 4 && strings.EqualFold(f[0], "ADMIN") && strings.EqualFold(f[1], "RESET") &&
		strings.EqualFold(f[2], "QUERY") && strings.EqualFold(f[3], "DIGESTS")
}

// explainCacheTarget returns the table named by EXPLAIN CACHE [db.]t as
// written ("" when missing), and whether sql is such a statement.
func explainCacheTarget(sql string) (string, bool) {
	f := words(sql)
	if len(f) < 2 || !strings.EqualFold(f[0], "EXPLAIN") || !strings.EqualFold(f[1], "CACHE") {
		return "", false
	}
	return strings.Join(f[2:], " "), true
}

// parseTableName reads [db.]t with optional backquotes.
func parseTableName(s, db string) (plugins.TableID, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 || s == "" {
		return plugins.TableID{}, false
	}
	for i, part := range parts {
		if len(part) >= 2 && part[0] == '`' && part[len(part)-1] == '`' {
			part = strings.ReplaceAll(part[1:len(part)-1], "``", "`")
		} else if part == "" || strings.ContainsAny(part, "` \t'\"(),;") {
			return plugins.TableID{}, false
		}
		parts[i] = part
	}
	if len(parts) == 2 {
		return plugins.TableID{Schema: parts[0], Table: parts[1]}, true
	}
	return plugins.TableID{Schema: db, Table: parts[0]}, true
}
