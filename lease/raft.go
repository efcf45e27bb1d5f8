package lease

// The Raft Manager: the lease terms, this proxy's lease (its renewals),
// and each table's state as the log applies it.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

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
	// Linger is how long this proxy keeps a write intent open after its
	// last write ended, so that the next write to the same tables joins it
	// instead of paying a Raft commit and a round of revocations. The
	// tables stay off memory everywhere meanwhile, as they would while
	// reloading after the close anyway. Negative: close at once.
	Linger time.Duration
	Logger *slog.Logger
}

// DefaultRaftConfig is a 2 s lease with a 250 ms margin, renewed every
// 500 ms: a proxy that stops answering holds writes up for at most
// 2.25 s, and a renewal may fail three times in a row before serving stops.
// Intents linger 20 ms: longer than the gaps between the statements of a
// busy writer (back-to-back UPDATEs on one connection come every 1-3 ms
// here, and sysbench's oltp_read_write writes every few milliseconds),
// short enough that a table written now and then is soon back in memory.
func DefaultRaftConfig() RaftConfig {
	return RaftConfig{Lease: 2 * time.Second, Margin: 250 * time.Millisecond, RenewEvery: 500 * time.Millisecond,
		OpenTimeout: 5 * time.Second, Linger: 20 * time.Millisecond}
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
//
// This proxy's writes to a table share one intent in the log (see
// shared): concurrent writers, the statements of a transaction and
// back-to-back writes pay one Raft commit and one round of revocations
// between them, not one each.
type Raft struct {
	cfg  RaftConfig
	log  Log
	lg   *slog.Logger
	base time.Time
	now  func() time.Duration // monotonic time since base; tests replace it

	validUntil atomic.Int64  // lease end, in now() units
	applied    atomic.Uint64 // highest log index applied here
	closed     atomic.Bool   // Close has begun: nothing is served any more

	mu     sync.RWMutex // guards tables and subs; the hot path takes it only to find a handle
	tables map[TableID]*raftTable
	subs   []func(TableID, Version)

	seq atomic.Uint64 // intent names

	pendMu  sync.Mutex // guards pending
	pending map[TableID]bool

	// binlogMu guards binlogWant, what this proxy's binary-log follower
	// last said (see SetBinlogWatched), and orders what is told the log.
	binlogMu   sync.Mutex
	binlogWant bool

	// wmu guards active and every shared's refs, gen, opened and closed;
	// writers take it twice per statement, never the read path.
	wmu     sync.Mutex
	active  map[TableID]*shared
	closing bool // Close has begun: no new closes are started

	// revMu guards revokes and seen: revocations by intent name that wait
	// for their intent to be applied here, and the names of the intents
	// applied last (a revocation can arrive after its intent).
	revMu   sync.Mutex
	revokes map[string]*namedRevoke
	seen    map[string]struct{}
	seenL   []string

	// holdMu guards holders: the members whose renewals this node
	// applied, by its own clock (see leader.go).
	holdMu  sync.Mutex
	holders map[string]*holder

	// appliedWake is closed and replaced each time applied moves, so a
	// renewal waits for the log without polling.
	wakeMu      sync.Mutex
	appliedWake chan struct{}

	// caughtUp is closed once the first renewal is applied (CaughtUp).
	caughtUp     chan struct{}
	caughtUpOnce sync.Once

	stop     chan struct{}
	stopOnce sync.Once
	ctx      context.Context // canceled by Close: ends the log calls in flight
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the renewal loop
	closers  sync.WaitGroup // closes of intents in flight; Add only under wmu, before closing
}

type raftTable struct {
	id           TableID
	m            *Raft
	version      atomic.Uint64
	intents      atomic.Int64  // open in the log, as applied here
	local        atomic.Int64  // this proxy's writes between BeginWrite and End
	revokedUntil atomic.Uint64 // not servable until applied reaches this index
	named        atomic.Int64  // revocations by intent name still waiting (namedRevoke)
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
	if cfg.Linger == 0 {
		cfg.Linger = d.Linger
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Raft{cfg: cfg, lg: cfg.Logger, base: time.Now(), tables: map[TableID]*raftTable{},
		pending: map[TableID]bool{}, active: map[TableID]*shared{}, revokes: map[string]*namedRevoke{},
		seen: map[string]struct{}{}, holders: map[string]*holder{}, appliedWake: make(chan struct{}), caughtUp: make(chan struct{}),
		stop: make(chan struct{})}
	m.now = func() time.Duration { return time.Since(m.base) }
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Config returns the lease terms in force.
func (m *Raft) Config() RaftConfig { return m.cfg }

// Start attaches the log and starts renewing the lease. Call it as soon
// as the log is open, before its node can lead (which takes an election
// timeout): the leader's half (RevokeOthers) asks the log who it is.
func (m *Raft) Start(l Log) {
	m.log = l
	m.wg.Add(1)
	go m.renewLoop()
}

// Close stops serving at once (the leader may take this node's closed
// cluster address, which follows, to mean it serves nothing), closes the
// intents that linger, giving the closes in flight a few seconds to commit
// (an intent left open keeps its tables off memory on every proxy until
// this node restarts or is removed), then stops renewing.
func (m *Raft) Close() {
	m.closed.Store(true)
	m.wmu.Lock()
	m.closing = true
	for _, s := range m.active {
		if s.closed {
			continue
		}
		s.closed = true
		if s.refs == 0 && s.opened {
			m.closers.Add(1)
			go m.closeLoop(s.name)
		}
	}
	clear(m.active)
	m.wmu.Unlock()
	done := make(chan struct{})
	go func() { m.closers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	m.stopOnce.Do(func() {
		close(m.stop)
		m.cancel()
	})
	m.wg.Wait()
	<-done
}

// LeaseValid reports whether this proxy's lease is valid now.
func (m *Raft) LeaseValid() bool {
	return int64(m.now()) < m.validUntil.Load() && !m.closed.Load()
}

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
	if !m.waitApplied(ctx, index) {
		return
	}
	m.caughtUpOnce.Do(func() { close(m.caughtUp) })
	// Every intent committed before this renewal is applied now, and one
	// announced before it started but not applied yet never will be.
	m.dropNamedRevokes(start)
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

// CaughtUp is closed once this proxy has applied the log up to a renewal
// it committed after it started: from then on it knows every table cached
// in the cluster before it started (the cache decides which writes need
// an intent by what it knows; see cache.Leases).
func (m *Raft) CaughtUp() <-chan struct{} { return m.caughtUp }

// waitApplied waits until this proxy has applied the log up to index, and
// reports whether it has.
func (m *Raft) waitApplied(ctx context.Context, index uint64) bool {
	for {
		m.wakeMu.Lock()
		wake := m.appliedWake
		m.wakeMu.Unlock()
		if m.applied.Load() >= index {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-m.stop:
			return false
		case <-wake:
		}
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
	if t.m.applied.Load() < t.revokedUntil.Load() || t.named.Load() != 0 {
		return 0, false
	}
	v := t.version.Load()
	if v < t.dirtyBelow.Load() || !t.m.LeaseValid() {
		return 0, false
	}
	return Version(v), true
}

// Unservable implements Table: Servable's conditions, this proxy's own
// writes first (they hold intents open in the log too).
func (t *raftTable) Unservable() string {
	local, intents := t.local.Load(), t.intents.Load()
	applied, revokedUntil := t.m.applied.Load(), t.revokedUntil.Load()
	version, dirtyBelow := t.version.Load(), t.dirtyBelow.Load()
	switch {
	case local != 0:
		return ownWrites(local)
	case intents != 0:
		return fmt.Sprintf("%d write intent(s) on it open in the cluster's log", intents)
	case applied < revokedUntil:
		return fmt.Sprintf("revoked for a write: this proxy has applied the log to index %d, the write's intent is at %d", applied, revokedUntil)
	case t.named.Load() != 0:
		return "revoked for a write whose intent this proxy has not applied yet"
	case version < dirtyBelow:
		return fmt.Sprintf("a version bump for a change seen here has not committed yet (version %d, bumped to %d)", version, dirtyBelow)
	case !t.m.LeaseValid():
		return "this proxy's lease has expired: its renewals are not committing"
	}
	return ""
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
func (m *Raft) Applied(index uint64) {
	if raiseTo(&m.applied, index) {
		m.wakeMu.Lock()
		close(m.appliedWake)
		m.appliedWake = make(chan struct{})
		m.wakeMu.Unlock()
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
