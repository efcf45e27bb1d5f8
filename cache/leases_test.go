package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"tableproxy/lease"
)

// memLeases is the lease manager of the plugin's unit tests: one proxy and
// no log, so an intent opens at once and its end bumps the version before
// End returns. The proxy itself always runs lease.Raft, on a cluster of
// one when it is alone.
type memLeases struct {
	mu     sync.Mutex
	tables map[lease.TableID]*memTable
	subs   []func(lease.TableID, lease.Version)
}

func newMemLeases() *memLeases { return &memLeases{tables: map[lease.TableID]*memTable{}} }

type memTable struct {
	id      lease.TableID
	version atomic.Uint64
	intents atomic.Int64
}

func (t *memTable) ID() lease.TableID { return t.id }

func (t *memTable) Version() lease.Version { return lease.Version(t.version.Load()) }

// Servable reads the intents before the version: End bumps the version
// before it releases the intent.
func (t *memTable) Servable() (lease.Version, bool) {
	if t.intents.Load() != 0 {
		return 0, false
	}
	return lease.Version(t.version.Load()), true
}

func (t *memTable) Unservable() string {
	if n := t.intents.Load(); n != 0 {
		return fmt.Sprintf("%d write(s) in flight", n)
	}
	return ""
}

func (m *memLeases) Table(id lease.TableID) lease.Table { return m.table(id) }

func (m *memLeases) table(id lease.TableID) *memTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[id]
	if t == nil {
		t = &memTable{id: id}
		t.version.Store(1)
		m.tables[id] = t
	}
	return t
}

func (m *memLeases) BeginWrite(ctx context.Context, ids ...lease.TableID) (*lease.Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := make([]*memTable, len(ids))
	for i, id := range ids {
		ts[i] = m.table(id)
		ts[i].intents.Add(1)
	}
	return lease.NewIntent(ids, func() map[lease.TableID]lease.Version {
		out := make(map[lease.TableID]lease.Version, len(ts))
		for _, t := range ts {
			out[t.id] = lease.Version(t.version.Add(1))
			t.intents.Add(-1)
		}
		m.notify(out)
		return out
	}), nil
}

func (m *memLeases) Invalidate(id lease.TableID) lease.Version {
	v := lease.Version(m.table(id).version.Add(1))
	m.notify(map[lease.TableID]lease.Version{id: v})
	return v
}

func (m *memLeases) Subscribe(fn func(lease.TableID, lease.Version)) {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
}

func (m *memLeases) notify(changed map[lease.TableID]lease.Version) {
	m.mu.Lock()
	subs := m.subs
	m.mu.Unlock()
	for id, v := range changed {
		for _, fn := range subs {
			fn(id, v)
		}
	}
}

// One proxy follows the binary log itself.
func (m *memLeases) FollowBinlog() bool    { return true }
func (m *memLeases) SetBinlogWatched(bool) {}
func (m *memLeases) BinlogWatched() bool   { return true }

// One proxy knows its catalog from the start.
func (m *memLeases) CaughtUp() <-chan struct{} { return closedChan }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
