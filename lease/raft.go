package lease

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Log is the replicated log the Raft-backed Manager stands on. Package
// cluster implements it; this package never imports Raft.
type Log interface {
	// ID names this proxy in the cluster; Incarnation tells this process
	// from its earlier runs.
	ID() string
	Incarnation() uint64
	// Renew commits a renewal of this proxy's lease and returns its index.
	Renew(ctx context.Context) (uint64, error)
	// OpenIntent commits intent id on tables and returns only once every
	// proxy that may be serving them from memory has stopped (it
	// acknowledged, or its lease ran out). Retrying an id is safe.
	OpenIntent(ctx context.Context, id string, tables []TableID) error
	// CloseIntent commits the end of intent id; its tables' versions go up.
	CloseIntent(ctx context.Context, id string) error
	// Bump commits a version bump of tables.
	Bump(ctx context.Context, tables []TableID) error
	// IsLeader reports whether this node leads now (for duties only).
	IsLeader() bool
}

// RaftConfig sets the lease terms.
type RaftConfig struct {
	// Lease is how long a committed renewal lets this proxy serve, counted
	// by its monotonic clock from before it sent the renewal.
	Lease time.Duration
	// Margin is taken off the lease here, and added to it by a leader
	// waiting a lease out, for clocks that do not tick at the same rate.
	Margin time.Duration
	// RenewEvery is the renewal period (one renewal in flight at a time).
	RenewEvery time.Duration
	// OpenTimeout bounds how long a write waits for the cluster to open its
	// intent (through an election); after that it passes through and its
	// tables are bumped.
	OpenTimeout time.Duration
	Logger      *slog.Logger
}

// DefaultRaftConfig is a 2 s lease with a 250 ms margin, renewed every
// 500 ms: a proxy that stops answering holds writes up for at most
// 2.25 s, and a renewal may fail three times in a row before serving stops.
func DefaultRaftConfig() RaftConfig {
	return RaftConfig{Lease: 2 * time.Second, Margin: 250 * time.Millisecond, RenewEvery: 500 * time.Millisecond,
		OpenTimeout: 5 * time.Second}
}

// Hold is how long a leader must assume a lease it cannot revoke may
// still be valid after applying its renewal.
func (c RaftConfig) Hold() time.Duration { return c.Lease + c.Margin }

// Raft is the Manager of a cluster of proxies. A proxy serves table T from
// memory only while all of these hold:
//   - its own lease is valid: now (monotonic) is before the start of its
//     last committed renewal plus Lease minus Margin;
//   - it has applied T's newest version (the cache checks that its copy
//     was loaded at Servable's version);
//   - no write intent on T is open in the log, none of this proxy's own
//     writes to T is in flight, and no revocation of T is waiting for this
//     proxy to apply the intent it announced.
//
// Versions only go up here, whatever the log replays: a table keeps the
// highest version it was ever told.
type Raft struct {
	cfg  RaftConfig
	log  Log
	lg   *slog.Logger
	base time.Time
	now  func() time.Duration // monotonic time since base; tests replace it

	validUntil atomic.Int64  // lease end, in now() units
	applied    atomic.Uint64 // highest log index applied here

	mu     sync.RWMutex // guards tables and subs; the hot path takes it only to find a handle
	tables map[TableID]*raftTable
	subs   []func(TableID, Version)

	seq atomic.Uint64 // intent names

	pendMu  sync.Mutex // guards pending
	pending map[TableID]bool

	stop     chan struct{}
	stopOnce sync.Once
	ctx      context.Context // canceled by Close: ends the log calls in flight
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type raftTable struct {
	id           TableID
	m            *Raft
	version      atomic.Uint64
	intents      atomic.Int64  // open in the log, as applied here
	local        atomic.Int64  // this proxy's writes between BeginWrite and End
	revokedUntil atomic.Uint64 // not servable until applied reaches this index
	dirtyBelow   atomic.Uint64 // not servable until version reaches this (a bump that could not be committed)
}

// NewRaft returns a Manager that serves nothing until Start has given it a
// log and a first renewal has committed.
func NewRaft(cfg RaftConfig) *Raft {
	d := DefaultRaftConfig()
	if cfg.Lease <= 0 {
		cfg.Lease = d.Lease
	}
	if cfg.Margin < 0 || cfg.Margin >= cfg.Lease {
		cfg.Margin = cfg.Lease / 8
	}
	if cfg.RenewEvery <= 0 {
		cfg.RenewEvery = cfg.Lease / 4
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = d.OpenTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Raft{cfg: cfg, lg: cfg.Logger, base: time.Now(), tables: map[TableID]*raftTable{},
		pending: map[TableID]bool{}, stop: make(chan struct{})}
	m.now = func() time.Duration { return time.Since(m.base) }
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Config returns the lease terms in force.
func (m *Raft) Config() RaftConfig { return m.cfg }

// Start attaches the log and starts renewing the lease.
func (m *Raft) Start(l Log) {
	m.log = l
	m.wg.Add(1)
	go m.renewLoop()
}

// Close stops renewing; the lease runs out on its own.
func (m *Raft) Close() {
	m.stopOnce.Do(func() {
		close(m.stop)
		m.cancel()
	})
	m.wg.Wait()
}

// LeaseValid reports whether this proxy's lease is valid now.
func (m *Raft) LeaseValid() bool { return int64(m.now()) < m.validUntil.Load() }

// FollowBinlog reports whether this proxy should follow the backend's
// binary log: only the leader does, so each bypassing write is proposed
// once.
func (m *Raft) FollowBinlog() bool { return m.log != nil && m.log.IsLeader() }

func (m *Raft) renewLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.RenewEvery)
	defer t.Stop()
	for {
		m.renewOnce()
		m.retryPending()
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// renewOnce commits one renewal. The lease is counted from before the
// request left, so it ends no later than any member's view of it; it is
// only ever extended.
func (m *Raft) renewOnce() {
	start := m.now()
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease/2)
	defer cancel()
	index, err := m.log.Renew(ctx)
	if err != nil {
		m.lg.Debug("lease: renewal failed", "err", err)
		return
	}
	// A lease is only good once this proxy has applied everything before
	// the renewal: a proxy that lagged while its lease was out was not
	// asked to stop serving the tables written meanwhile, and must see
	// those intents and versions first.
	for m.applied.Load() < index {
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-time.After(time.Millisecond):
		}
	}
	wasValid := m.LeaseValid()
	end := int64(start + m.cfg.Lease - m.cfg.Margin)
	for {
		cur := m.validUntil.Load()
		if end <= cur || m.validUntil.CompareAndSwap(cur, end) {
			break
		}
	}
	if !wasValid && m.LeaseValid() {
		// Loads were skipped while the lease was out: ask for them again.
		m.notifyAll()
	}
}

// Table implements Manager.
func (m *Raft) Table(id TableID) Table { return m.table(id) }

func (m *Raft) table(id TableID) *raftTable {
	m.mu.RLock()
	t := m.tables[id]
	m.mu.RUnlock()
	if t != nil {
		return t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t = m.tables[id]; t == nil {
		t = &raftTable{id: id, m: m}
		t.version.Store(1)
		m.tables[id] = t
	}
	return t
}

func (t *raftTable) ID() TableID { return t.id }

func (t *raftTable) Version() Version { return Version(t.version.Load()) }

// Servable reads the blocks before the version: the log's applier raises
// a version before it lowers the intent count, so a reader that sees no
// intent sees the raised version.
func (t *raftTable) Servable() (Version, bool) {
	if t.intents.Load() != 0 || t.local.Load() != 0 {
		return 0, false
	}
	if t.m.applied.Load() < t.revokedUntil.Load() {
		return 0, false
	}
	v := t.version.Load()
	if v < t.dirtyBelow.Load() || !t.m.LeaseValid() {
		return 0, false
	}
	return Version(v), true
}

// BeginWrite implements Manager: it stops this proxy serving ids at once,
// then opens the intent through the log, which returns once every other
// proxy has stopped too.
func (m *Raft) BeginWrite(ctx context.Context, ids ...TableID) (*Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := make([]*raftTable, len(ids))
	for i, id := range ids {
		ts[i] = m.table(id)
		ts[i].local.Add(1)
	}
	release := func() {
		for _, t := range ts {
			t.local.Add(-1)
		}
	}
	name := fmt.Sprintf("%s/%x/%d", m.log.ID(), m.log.Incarnation(), m.seq.Add(1))
	octx, cancel := context.WithTimeout(ctx, m.cfg.OpenTimeout)
	err := m.log.OpenIntent(octx, name, ids)
	cancel()
	if err != nil {
		release()
		// It may have committed after all: close it (a close of an intent
		// that never opened changes nothing).
		m.closeLater(name)
		return nil, fmt.Errorf("lease: write intent on %v: %w", ids, err)
	}
	in := &Intent{tables: append([]TableID(nil), ids...)}
	in.end = func() map[TableID]Version {
		out := make(map[TableID]Version, len(ts))
		for _, t := range ts {
			out[t.id] = t.Version() + 1
		}
		// The intent stays open in the log until the close commits, so
		// no proxy serves these tables meanwhile, this one included: the
		// write's answer need not wait for it.
		release()
		m.closeLater(name)
		return out
	}
	return in, nil
}

// closeLater commits the close of intent name, retrying until it has.
func (m *Raft) closeLater(name string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		backoff := 20 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
			err := m.log.CloseIntent(ctx, name)
			cancel()
			if err == nil {
				return
			}
			m.lg.Warn("lease: closing a write intent failed; retrying", "intent", name, "err", err)
			select {
			case <-m.stop:
				return // a restart of this node closes its intents
			case <-time.After(backoff):
			}
			if backoff < time.Second {
				backoff *= 2
			}
		}
	}()
}

// Invalidate implements Manager. A bump that cannot be committed now keeps
// this proxy off its copy until a later bump is applied, and is retried
// with every renewal.
func (m *Raft) Invalidate(id TableID) Version {
	t := m.table(id)
	want := t.version.Load() + 1
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease)
	err := m.log.Bump(ctx, []TableID{id})
	cancel()
	if err != nil {
		raiseTo(&t.dirtyBelow, want)
		m.pendMu.Lock()
		m.pending[id] = true
		m.pendMu.Unlock()
		m.lg.Warn("lease: version bump failed; this proxy stops serving the table until one commits", "table", id.String(), "err", err)
	}
	return Version(want)
}

func (m *Raft) retryPending() {
	m.pendMu.Lock()
	var ids []TableID
	for id := range m.pending {
		ids = append(ids, id)
	}
	m.pendMu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease/2)
	defer cancel()
	if err := m.log.Bump(ctx, ids); err != nil {
		return
	}
	m.pendMu.Lock()
	for _, id := range ids {
		delete(m.pending, id)
	}
	m.pendMu.Unlock()
}

// Subscribe implements Manager.
func (m *Raft) Subscribe(fn func(TableID, Version)) {
	m.mu.Lock()
	m.subs = append(m.subs, fn)
	m.mu.Unlock()
}

func (m *Raft) notify(id TableID, v Version) {
	m.mu.RLock()
	subs := m.subs
	m.mu.RUnlock()
	for _, fn := range subs {
		fn(id, v)
	}
}

func (m *Raft) notifyAll() {
	m.mu.RLock()
	all := make([]*raftTable, 0, len(m.tables))
	for _, t := range m.tables {
		all = append(all, t)
	}
	m.mu.RUnlock()
	for _, t := range all {
		m.notify(t.id, t.Version())
	}
}

// TableState is told, in log order, each change of a table's version and
// open intents.
func (m *Raft) TableState(id TableID, v Version, intents int) {
	t := m.table(id)
	raised := raiseTo(&t.version, uint64(v)) // before the intents: see Servable
	t.intents.Store(int64(intents))
	if raised || intents == 0 {
		m.notify(id, t.Version())
	}
}

// Applied is told the index of each entry applied, after its effects.
func (m *Raft) Applied(index uint64) { raiseTo(&m.applied, index) }

// Revoke stops this proxy serving tables until it has applied index (the
// intent that announced the write).
func (m *Raft) Revoke(tables []TableID, index uint64) {
	for _, id := range tables {
		raiseTo(&m.table(id).revokedUntil, index)
	}
}

// raiseTo sets a to v if v is higher, and reports whether it did.
func raiseTo(a *atomic.Uint64, v uint64) bool {
	for {
		cur := a.Load()
		if v <= cur {
			return false
		}
		if a.CompareAndSwap(cur, v) {
			return true
		}
	}
}

var _ Manager = (*Raft)(nil)
