package lease

import (
	"context"
	"sync"
	"sync/atomic"
)

// Local is the single-node Manager: one proxy, so its own bookkeeping is
// the whole truth and a lease never expires.
type Local struct {
	mu     sync.RWMutex // guards tables and subs; readers take it only to find a handle
	tables map[TableID]*localTable
	subs   []func(TableID, Version)
}

// NewLocal returns an empty single-node Manager.
func NewLocal() *Local {
	return &Local{tables: map[TableID]*localTable{}}
}

type localTable struct {
	id      TableID
	version atomic.Uint64
	intents atomic.Int64 // open write intents
}

func (t *localTable) ID() TableID { return t.id }

func (t *localTable) Version() Version { return Version(t.version.Load()) }

// Servable reads intents before the version: a writer bumps the version
// before it decrements intents, so a reader that sees no intent also sees
// the bumped version (both atomics are sequentially consistent).
func (t *localTable) Servable() (Version, bool) {
	if t.intents.Load() != 0 {
		return 0, false
	}
	return Version(t.version.Load()), true
}

// Unservable implements Table.
func (t *localTable) Unservable() string {
	if n := t.intents.Load(); n != 0 {
		return ownWrites(n)
	}
	return ""
}

// Table implements Manager.
func (m *Local) Table(id TableID) Table { return m.table(id) }

func (m *Local) table(id TableID) *localTable {
	m.mu.RLock()
	t := m.tables[id]
	m.mu.RUnlock()
	if t != nil {
		return t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t = m.tables[id]; t == nil {
		t = &localTable{id: id}
		t.version.Store(1)
		m.tables[id] = t
	}
	return t
}

// BeginWrite implements Manager. On one node opening an intent cannot fail
// or wait.
func (m *Local) BeginWrite(ctx context.Context, ids ...TableID) (*Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := make([]*localTable, len(ids))
	for i, id := range ids {
		ts[i] = m.table(id)
		ts[i].intents.Add(1)
	}
	in := &Intent{tables: append([]TableID(nil), ids...)}
	in.end = func() map[TableID]Version {
		out := make(map[TableID]Version, len(ts))
		for _, t := range ts {
			// Bump first, then release: see Servable.
			out[t.id] = Version(t.version.Add(1))
			t.intents.Add(-1)
		}
		m.notify(out)
		return out
	}
	return in, nil
}

// Invalidate implements Manager.
func (m *Local) Invalidate(id TableID) Version {
	v := Version(m.table(id).version.Add(1))
	m.notify(map[TableID]Version{id: v})
	return v
}

// Subscribe implements Manager.
func (m *Local) Subscribe(fn func(TableID, Version)) {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
}

func (m *Local) notify(changed map[TableID]Version) {
	m.mu.RLock()
	subs := m.subs
	m.mu.RUnlock()
	for id, v := range changed {
		for _, fn := range subs {
			fn(id, v)
		}
	}
}

var _ Manager = (*Local)(nil)
