package cache

import (
	"fmt"
	"unsafe"

	"tableproxy/configs"
	"tableproxy/internal/sizedlru"
	"tableproxy/plugins"
)

// What the caches keyed by statement texts may hold. Their keys are what
// clients send, so they are bounded in bytes as well as in entries: a
// client sending distinct long statements evicts older entries rather than
// growing the proxy.
const (
	defaultPlanCacheSize     = "32MB"
	defaultMetadataCacheSize = "16MB"
	defaultMaxPlannedText    = "64KB"
	maxPlanEntries           = 8192
	maxMetadataEntries       = 8192
	maxEffectEntries         = 4096
)

// memorySizes are the byte bounds of the plan, metadata and effect caches
// and the longest statement text planned.
type memorySizes struct {
	plans, metadata, plannedText int64
}

// readMemorySizes reads the options' sizes, with their defaults.
func readMemorySizes(opts Options) (memorySizes, error) {
	var m memorySizes
	for _, o := range []struct {
		name, val, def string
		into           *int64
	}{
		{"plan_cache_size", opts.PlanCacheSize, defaultPlanCacheSize, &m.plans},
		{"metadata_cache_size", opts.MetadataCacheSize, defaultMetadataCacheSize, &m.metadata},
		{"max_planned_text", opts.MaxPlannedText, defaultMaxPlannedText, &m.plannedText},
	} {
		v := o.val
		if v == "" {
			v = o.def
		}
		n, err := configs.ParseByteSize(v)
		if err != nil || n <= 0 {
			return m, fmt.Errorf("%s: %q: want a size like %s", o.name, v, o.def)
		}
		*o.into = n
	}
	return m, nil
}

// newStatementCaches makes the plan, metadata and effect caches within
// their byte bounds (the effect cache, of accounts of write statements,
// shares the metadata cache's bound).
func (p *Plugin) newStatementCaches(m memorySizes) {
	p.plans = sizedlru.New[planKey, *planEntry](m.plans, maxPlanEntries)
	p.learned = sizedlru.New[defsKey, *learned](m.metadata, maxMetadataEntries)
	p.effects = sizedlru.New[planKey, plugins.Analysis](m.metadata, maxEffectEntries)
	p.maxPlannedText = int(m.plannedText)
}

// Estimated costs, in bytes, of what the caches keep. A plan holds, for
// each literal or marker of its text, an operand (with its value); the
// estimate counts them from the plan's parameter count, and the text
// twice (the key and what the plan copied of it).
const (
	entryOverhead = 512
	operandCost   = 256
)

func planCost(ent *planEntry) int64 {
	n := int64(entryOverhead + 2*len(ent.key.text) + len(ent.key.db))
	if ent.plan != nil {
		n += int64(ent.plan.NParams) * operandCost
	}
	return n
}

// learnedCost counts the plan entry the key names too: the key keeps it
// alive after the plan cache let it go.
func learnedCost(k defsKey, m *learned) int64 {
	n := int64(entryOverhead + len(k.normalized) + len(k.settings) + len(k.paramTypes))
	if k.ent != nil {
		n += planCost(k.ent)
	}
	for _, d := range m.defs {
		n += int64(len(d))
	}
	return n + int64(len(m.fields))*int64(unsafe.Sizeof(*m.fields[0])+64)
}

func effectCost(k planKey, a plugins.Analysis) int64 {
	n := int64(entryOverhead + len(k.text) + len(k.db))
	for _, st := range a.Stmts {
		n += int64(len(st.SQL)) + 64
	}
	return n + int64(len(a.Tables)+len(a.Written)+len(a.Targets)+len(a.Named))*64
}

// Shed implements plugins.Shedder: the plans, learned metadata, accounts
// and cached answers go (each is made again from use); the tables' copies
// stay.
func (p *Plugin) Shed() {
	p.forgetPlans()
	p.learned.Purge()
	p.effects.Purge()
	if p.results != nil {
		p.results.Store.Clear()
	}
}

// A session's scratch buffers (the template of its statement, its literals
// and arguments) grow to its largest statement; beyond these they are
// let go once the statement is answered, so that a thousand idle sessions
// do not each hold their largest statement, and the row contexts let go of
// the statement's arguments and the table copy they read.
const (
	maxScratchBytes = 64 << 10
	maxScratchItems = 4096
)

func (si *sessionInfo) trimScratch() {
	// (Nor a table's copy, which a reload replaces.)
	si.serve.run.Release()
	si.serve.write.Release()
	if cap(si.tmpl) > maxScratchBytes {
		si.tmpl = nil
	}
	if cap(si.lits) > maxScratchItems {
		si.lits = nil
	}
	if cap(si.args) > maxScratchItems {
		si.args = nil
	}
}
