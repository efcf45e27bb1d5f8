package digest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"tableproxy/cache/eval"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// The advisor: which tables to cache, from the digests. For each table
// read through the proxy it adds up its digests' reads and writes, plans
// each read digest against the table's definition as the cache would
// plan it were the table cached (Cache.PlanWhy: the cache's own planner,
// not a second classifier), and weighs what caching would save against
// its size and its writes.

// Verdicts.
const (
	verdictCache        = "cache"
	verdictTooLarge     = "too large"
	verdictTooManyWrite = "too many writes"
	verdictNotCovered   = "reads not covered"
	verdictCached       = "already cached"
)

// candidate is one table's row of tableproxy.cache_candidates.
type candidate struct {
	id                         plugins.TableID
	rows, dataBytes, indexByte int64
	memBytes                   int64
	found                      bool // the backend has the table
	reads, proxyWrites         uint64
	binlogWrites               uint64
	readsPerSec                float64
	proxyWritesPerSec          float64
	bypassWritesPerSec         float64
	covered                    uint64
	share                      float64 // percent of reads the evaluator would answer
	savedPerSec                float64
	penaltyMsPerSec            float64
	verdict, reason            string
	digests                    []digestPlan // read digests, most counted first
}

// digestPlan is one read digest of a table and how it would be answered.
type digestPlan struct {
	text, sample, schema string
	prepared             bool
	count                uint64
	why                  eval.Why
}

// systemSchemas are never candidates: the backend's own, and the proxy's.
var systemSchemas = map[string]bool{"information_schema": true, "mysql": true,
	"performance_schema": true, "sys": true, "tableproxy": true}

// candidates computes the advisor's rows: every table read through the
// proxy, or only one (only != nil), read or not.
func (p *Plugin) candidates(only *plugins.TableID) ([]*candidate, error) {
	entries, since := p.store.Snapshot()
	secs := p.now().Sub(since).Seconds()
	if secs < 1 {
		secs = 1
	}
	byTable := map[plugins.TableID]*candidate{}
	get := func(id plugins.TableID, create bool) *candidate {
		if c := byTable[id]; c != nil || !create {
			return c
		}
		if systemSchemas[strings.ToLower(id.Schema)] || id.Schema == "" || only != nil && *only != id {
			return nil
		}
		c := &candidate{id: id}
		byTable[id] = c
		return c
	}
	if only != nil {
		get(*only, true)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Count > entries[j].Count })
	for i := range entries {
		e := &entries[i]
		for _, id := range e.Reads {
			if c := get(id, true); c != nil {
				c.reads += e.Count
				c.digests = append(c.digests, digestPlan{text: e.Text, sample: e.Sample, schema: e.Schema,
					prepared: e.Prepared, count: e.Count})
			}
		}
		for _, id := range e.Writes {
			if c := get(id, true); c != nil {
				c.proxyWrites += e.Count
			}
		}
	}
	// Tables only written are no candidates (nothing to save).
	for id, c := range byTable {
		if c.reads == 0 && only == nil {
			delete(byTable, id)
		}
	}
	p.bmu.Lock()
	for id, n := range p.binlogWrites {
		if c := byTable[id]; c != nil {
			c.binlogWrites = n
		}
	}
	p.bmu.Unlock()
	out := make([]*candidate, 0, len(byTable))
	for _, c := range byTable {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].reads != out[j].reads {
			return out[i].reads > out[j].reads
		}
		return out[i].id.Schema+"."+out[i].id.Table < out[j].id.Schema+"."+out[j].id.Table
	})
	if len(out) == 0 {
		return out, nil
	}
	if err := p.readSizes(out); err != nil {
		return nil, err
	}
	cost := p.set.writePenalty
	if p.cache != nil {
		if mean, n := p.cache.WriteCost(); n > 0 {
			cost = mean
		}
	}
	for _, c := range out {
		c.readsPerSec = float64(c.reads) / secs
		c.proxyWritesPerSec = float64(c.proxyWrites) / secs
		if c.binlogWrites > c.proxyWrites {
			c.bypassWritesPerSec = float64(c.binlogWrites-c.proxyWrites) / secs
		}
		p.plan(c)
		c.savedPerSec = c.readsPerSec * c.share / 100
		c.penaltyMsPerSec = (c.proxyWritesPerSec + c.bypassWritesPerSec) * float64(cost) / float64(time.Millisecond)
		p.judge(c, cost)
	}
	return out, nil
}

// plan plans each read digest of c against its table's definition.
func (p *Plugin) plan(c *candidate) {
	if p.cache == nil || !c.found {
		for i := range c.digests {
			c.digests[i].why = eval.Because(eval.NothingCached, "the cache plugin is off")
		}
		return
	}
	id := lease.TableID(c.id)
	def, err := p.definition(id)
	if err != nil {
		c.reason = err.Error()
	}
	lookup := func(t lease.TableID) *eval.Snapshot {
		if t == id {
			return def
		}
		return p.cache.Copy(t) // the tables cached now stay cached
	}
	for i := range c.digests {
		d := &c.digests[i]
		if def == nil {
			d.why = eval.Because(eval.TableNotCached, "the table cannot be cached: "+c.reason)
		} else {
			d.why = p.cache.PlanWhy(d.sample, d.prepared, d.schema, lookup)
		}
		if !d.why.Declined() {
			c.covered += d.count
		}
	}
	if c.reads > 0 {
		c.share = float64(c.covered) * 100 / float64(c.reads)
	}
}

// definition is id's definition: the cached copy, or read from the
// backend (and kept for defTTL).
func (p *Plugin) definition(id lease.TableID) (*eval.Snapshot, error) {
	if s := p.cache.Copy(id); s != nil {
		return s, nil
	}
	p.dmu.Lock()
	d, ok := p.defs[id]
	p.dmu.Unlock()
	if ok && p.now().Sub(d.at) < defTTL {
		return d.snap, d.err
	}
	if p.user == "" {
		return nil, fmt.Errorf("no admin user to read the table's definition as")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := p.cache.Definition(ctx, p.user, id)
	p.dmu.Lock()
	p.defs[id] = definition{snap: snap, err: err, at: p.now()}
	p.dmu.Unlock()
	return snap, err
}

// readSizes reads each table's size and row count from the backend's
// catalog, and estimates its size in memory.
func (p *Plugin) readSizes(cs []*candidate) error {
	if p.backend == nil || p.user == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.backend.Connect(ctx, p.user, "")
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, c := range cs {
		r, err := conn.Execute(`SELECT IFNULL(TABLE_ROWS, 0), IFNULL(DATA_LENGTH, 0), IFNULL(INDEX_LENGTH, 0) FROM information_schema.TABLES
			WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND TABLE_TYPE = 'BASE TABLE'`, c.id.Schema, c.id.Table)
		if err != nil {
			return err
		}
		if r.RowNumber() > 0 {
			c.found = true
			c.rows, _ = r.GetInt(0, 0)
			c.dataBytes, _ = r.GetInt(0, 1)
			c.indexByte, _ = r.GetInt(0, 2)
		}
		r.Close()
		if !c.found {
			continue
		}
		r, err = conn.Execute(`SELECT DATA_TYPE, IFNULL(CHARACTER_OCTET_LENGTH, 0), IFNULL(NUMERIC_PRECISION, 0)
			FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, c.id.Schema, c.id.Table)
		if err != nil {
			return err
		}
		var width int64
		for i := 0; i < r.RowNumber(); i++ {
			octets, _ := r.GetInt(i, 1)
			prec, _ := r.GetInt(i, 2)
			width += textWidth(strings.ToLower(eval.ResultString(r, i, 0)), octets, prec)
		}
		r.Close()
		c.memBytes = memoryEstimate(c.rows, width, c.dataBytes)
	}
	return nil
}

// textWidth is a column's width in the text protocol's row format (the
// form the cache keeps rows in), its length prefix included: exact for
// numbers and dates at their widest, a guess for variable strings (their
// declared width, up to 64 bytes; the catalog does not say their mean).
func textWidth(typ string, octets, prec int64) int64 {
	switch typ {
	case "tinyint", "year", "bit":
		return 5
	case "smallint":
		return 7
	case "mediumint":
		return 9
	case "int", "integer":
		return 12
	case "bigint":
		return 21
	case "decimal", "numeric":
		return prec + 3
	case "float":
		return 13
	case "double", "real":
		return 23
	case "date":
		return 11
	case "time":
		return 9
	case "datetime", "timestamp":
		return 20
	case "enum", "set":
		return 9
	case "char", "binary":
		return octets + 1
	}
	if octets > 64 || octets == 0 {
		octets = 64
	}
	return octets + 1
}

// memoryEstimate is what a copy of rows rows of the given text width
// takes in memory: each row's payload plus the 24 bytes the cache counts
// per row, and the integer indexes (about 8 bytes a row), or the data on
// the backend if that is larger (the estimate of strings is a guess).
func memoryEstimate(rows, width, data int64) int64 {
	est := rows * (width + 24 + 8)
	if data > est {
		return data
	}
	return est
}

// judge gives c its verdict and the figures behind it.
func (p *Plugin) judge(c *candidate, cost time.Duration) {
	limit := int64(0)
	cached := false
	if p.cache != nil {
		limit = p.cache.MaxTableSize()
		cached = p.cache.IsCached(lease.TableID(c.id))
	}
	writes := c.proxyWritesPerSec + c.bypassWritesPerSec
	writeShare := 0.0
	if writes+c.readsPerSec > 0 {
		writeShare = writes * 100 / (writes + c.readsPerSec)
	}
	figures := fmt.Sprintf("%.2f reads/s, %.1f%% answerable from memory, %.2f writes/s (%.1f%% of its statements, %v each)",
		c.readsPerSec, c.share, writes, writeShare, cost.Round(time.Microsecond))
	switch {
	case !c.found:
		c.verdict, c.reason = verdictNotCovered, "the backend has no base table of this name"
	case cached:
		c.verdict, c.reason = verdictCached, figures
	case p.cache == nil:
		c.verdict, c.reason = verdictNotCovered, "the cache plugin is off"
	case limit > 0 && (c.dataBytes > limit || c.memBytes > 2*limit):
		c.verdict = verdictTooLarge
		c.reason = fmt.Sprintf("%s of data (about %s in memory), the cache takes at most %s", size(c.dataBytes), size(c.memBytes), size(limit))
	case c.reason != "" && c.covered == 0:
		c.verdict = verdictNotCovered // cannot be cached: the definition's error
	case writeShare > float64(p.set.maxWriteShare):
		c.verdict = verdictTooManyWrite
		c.reason = fmt.Sprintf("%s: above max_write_share %d%%, every write revokes the cached copy and reloads it", figures, p.set.maxWriteShare)
	case c.share < float64(p.set.minCoveredShare):
		c.verdict = verdictNotCovered
		c.reason = fmt.Sprintf("%s: below min_covered_share %d%%; mostly %s", figures, p.set.minCoveredShare, topPass(c.digests))
	default:
		c.verdict = verdictCache
		c.reason = fmt.Sprintf("%s: saves %.2f backend reads/s, costs %.3f ms/s of writes", figures, c.savedPerSec, c.penaltyMsPerSec)
	}
}

// topPass is the label and words of the reason most of the uncovered
// reads would go to the backend for.
func topPass(ds []digestPlan) string {
	counts := map[eval.PassReason]uint64{}
	texts := map[eval.PassReason]string{}
	var best eval.PassReason
	for _, d := range ds {
		if !d.why.Declined() {
			continue
		}
		counts[d.why.Reason] += d.count
		if texts[d.why.Reason] == "" {
			texts[d.why.Reason] = d.why.Text
		}
		if counts[d.why.Reason] > counts[best] || best == eval.NoReason {
			best = d.why.Reason
		}
	}
	if best == eval.NoReason {
		return "no reads seen"
	}
	return best.String() + " (" + texts[best] + ")"
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}
