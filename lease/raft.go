package lease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
	// OpenIntent commits intent id on tables and returns its index only
	// once every other proxy that may be serving them from memory has
	// stopped (it acknowledged, or its lease ran out). This proxy is not
	// asked: the caller stops its own copies, until it has applied the
	// index returned. Retrying an id is safe.
	OpenIntent(ctx context.Context, id string, tables []TableID) (uint64, error)
	// CloseIntent commits the end of intent id; its tables' versions go up.
	CloseIntent(ctx context.Context, id string) error
	// Bump commits a version bump of tables.
	Bump(ctx context.Context, tables []TableID) error
	// IsLeader reports whether this node leads now (for duties only).
	IsLeader() bool
	// SetBinlogWatched says, while this node leads, whether it follows
	// the backend's binary log and has caught up with it.
	// BinlogWatched reports whether the current term's leader has said
	// it does (as far as this node has applied the log).
	SetBinlogWatched(ok bool)
	BinlogWatched() bool
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

	// appliedWake is closed and replaced each time applied moves, so a
	// renewal waits for the log without polling.
	wakeMu      sync.Mutex
	appliedWake chan struct{}

	stop     chan struct{}
	stopOnce sync.Once
	ctx      context.Context // canceled by Close: ends the log calls in flight
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the renewal loop
	closers  sync.WaitGroup // closes of intents in flight; Add only under wmu, before closing
}

// shared is one write intent in the log that this proxy's writes to its
// tables share. A write to tables that already have one joins it (no Raft
// round trip, no revocation: every other proxy already stopped serving
// them when it opened); it closes once no write has used it for Linger.
// The other proxies see one longer write: their copies stay unservable
// from its open until its close applies, and the close bumps the versions
// once, after every write that used it has ended.
type shared struct {
	name  string
	ids   []TableID
	ready chan struct{} // closed once the open committed or failed
	err   error         // the open's error; written before ready closes

	refs   int    // writes between BeginWrite and End that use it
	gen    uint64 // counts its idle periods: a linger timer of an older one does nothing
	opened bool   // the open committed
	closed bool   // no write may join it any more
}

// namedRevoke is a revocation received before its intent was committed:
// its tables stay off memory until the intent (open or close) is applied
// here, or until a renewal started after it was received is applied.
type namedRevoke struct {
	tables []*raftTable
	at     time.Duration // when it arrived, in now() units
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
		seen: map[string]struct{}{}, appliedWake: make(chan struct{}), stop: make(chan struct{})}
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

// FollowBinlog reports whether this proxy should follow the backend's
// binary log: only the leader does, so each bypassing write is proposed
// once.
func (m *Raft) FollowBinlog() bool { return m.log != nil && m.log.IsLeader() }

// SetBinlogWatched is told by the leader's binary-log follower whether it
// follows the log and has caught up; the others ask BinlogWatched before
// answering from memory, since writes that bypass the proxies reach them
// only through the versions that follower bumps.
// A bump this proxy could not commit (see Invalidate) is a change the
// others have not been told of: until it commits, it says it is not.
func (m *Raft) SetBinlogWatched(ok bool) {
	m.binlogMu.Lock()
	defer m.binlogMu.Unlock()
	m.binlogWant = ok
	m.tellBinlogLocked()
}

func (m *Raft) tellBinlog() {
	m.binlogMu.Lock()
	defer m.binlogMu.Unlock()
	m.tellBinlogLocked()
}

func (m *Raft) tellBinlogLocked() {
	if m.log == nil {
		return
	}
	m.pendMu.Lock()
	pending := len(m.pending)
	m.pendMu.Unlock()
	m.log.SetBinlogWatched(m.binlogWant && pending == 0)
}

// BinlogWatched reports whether the cluster's leader has said it follows
// the binary log and has caught up, in the current term.
func (m *Raft) BinlogWatched() bool { return m.log != nil && m.log.BinlogWatched() }

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

// BeginWrite implements Manager: it stops this proxy serving ids at once,
// then joins the intent this proxy already holds on them or opens one
// through the log, which returns once every other proxy has stopped too.
func (m *Raft) BeginWrite(ctx context.Context, ids ...TableID) (*Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := make([]*raftTable, len(ids))
	for i, id := range ids {
		ts[i] = m.table(id)
		ts[i].local.Add(1)
	}
	uses, mine := m.join(ts)
	var err error
	if mine != nil {
		octx, cancel := context.WithTimeout(ctx, m.cfg.OpenTimeout)
		var index uint64
		index, err = m.log.OpenIntent(octx, mine.name, mine.ids)
		cancel()
		if err == nil {
			// The leader asks every other proxy to stop serving, not this
			// one: its writes keep its copies off (local) until they end,
			// and this keeps them off after that until the open is
			// applied here, from where the intent itself does. Sparing
			// the leader a revocation round trip to the writer while the
			// open commits is worth a fraction of a millisecond on a
			// lone write.
			m.Revoke(mine.ids, index)
		}
		m.wmu.Lock()
		mine.err, mine.opened = err, err == nil
		if err != nil {
			// It may have committed after all: close it (a close of an
			// intent that never opened changes nothing).
			mine.closed = true
			m.forgetLocked(mine)
			m.closeLaterLocked(mine.name)
		}
		m.wmu.Unlock()
		close(mine.ready)
	}
	for _, s := range uses {
		if s == mine {
			continue
		}
		select {
		case <-s.ready:
			if s.err != nil && err == nil {
				err = s.err
			}
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	}
	if err != nil {
		m.release(ts, uses)
		return nil, fmt.Errorf("lease: write intent on %v: %w", ids, err)
	}
	return NewIntent(ids, func() map[TableID]Version {
		out := make(map[TableID]Version, len(ts))
		for _, t := range ts {
			out[t.id] = t.Version() + 1
		}
		// The intent stays open in the log until its close commits, so no
		// proxy serves these tables meanwhile, this one included: the
		// write's answer need not wait for it.
		m.release(ts, uses)
		return out
	}), nil
}

// join finds, for each table, the intent of this proxy that a new write
// may share, and takes a reference on each. The tables left over get a new
// intent (mine), registered before it opens so that concurrent writers
// wait for its open instead of opening their own.
//
// An intent that has opened is joined only while this proxy's lease is
// valid: the log keeps it open until this proxy closes it, unless this
// proxy is removed from the cluster, and a removed proxy loses its lease
// before the leader closes the intents it left (see cluster.RemoveNode).
func (m *Raft) join(ts []*raftTable) (uses []*shared, mine *shared) {
	valid := m.LeaseValid()
	m.wmu.Lock()
	defer m.wmu.Unlock()
	var missing []TableID
	for _, t := range ts {
		s := m.active[t.id]
		if s == nil || s.closed || (s.opened && !valid) {
			missing = append(missing, t.id)
			continue
		}
		if !slices.Contains(uses, s) {
			s.refs++
			uses = append(uses, s)
		}
	}
	if len(missing) == 0 {
		return uses, nil
	}
	mine = &shared{name: fmt.Sprintf("%s/%x/%d", m.log.ID(), m.log.Incarnation(), m.seq.Add(1)),
		ids: missing, ready: make(chan struct{}), refs: 1}
	for _, id := range missing {
		m.active[id] = mine
	}
	return append(uses, mine), mine
}

// release ends one write's use of its intents; an intent no write uses
// closes after Linger unless a write joins it first.
func (m *Raft) release(ts []*raftTable, uses []*shared) {
	for _, t := range ts {
		t.local.Add(-1)
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for _, s := range uses {
		s.refs--
		if s.refs > 0 || s.closed {
			continue
		}
		if m.cfg.Linger < 0 {
			s.closed = true
			m.forgetLocked(s)
			m.closeLaterLocked(s.name)
			continue
		}
		s.gen++
		gen := s.gen
		time.AfterFunc(m.cfg.Linger, func() { m.idle(s, gen) })
	}
}

// idle closes s if no write has used it since its idle period gen began.
func (m *Raft) idle(s *shared, gen uint64) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if s.gen != gen || s.refs > 0 || s.closed {
		return
	}
	s.closed = true
	m.forgetLocked(s)
	m.closeLaterLocked(s.name)
}

// forgetLocked unregisters s from the tables it is the intent of.
func (m *Raft) forgetLocked(s *shared) {
	for _, id := range s.ids {
		if m.active[id] == s {
			delete(m.active, id)
		}
	}
}

// closeLaterLocked starts committing the close of intent name in the
// background. The caller holds wmu. After Close has begun, nothing is
// started: a restart of this node closes its intents.
func (m *Raft) closeLaterLocked(name string) {
	if m.closing {
		return
	}
	m.closers.Add(1)
	go m.closeLoop(name)
}

// closeLoop commits the close of intent name, retrying until it has.
func (m *Raft) closeLoop(name string) {
	defer m.closers.Done()
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
		m.tellBinlog()
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
	m.tellBinlog()
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

// IntentApplied is told, after the tables' states, each intent whose open
// or close was applied: a revocation waiting for it is over.
func (m *Raft) IntentApplied(name string) {
	m.revMu.Lock()
	defer m.revMu.Unlock()
	if _, ok := m.seen[name]; !ok {
		// Enough to cover the revocations in flight; older names only
		// cost a revocation that waits for the next renewal.
		const keep = 4096
		m.seen[name] = struct{}{}
		m.seenL = append(m.seenL, name)
		if len(m.seenL) > keep {
			delete(m.seen, m.seenL[0])
			m.seenL = m.seenL[1:]
		}
	}
	if r := m.revokes[name]; r != nil {
		delete(m.revokes, name)
		for _, t := range r.tables {
			t.named.Add(-1)
		}
	}
}

// Revoke stops this proxy serving tables until it has applied index (the
// intent that announced the write).
func (m *Raft) Revoke(tables []TableID, index uint64) {
	for _, id := range tables {
		raiseTo(&m.table(id).revokedUntil, index)
	}
}

// RevokeIntent stops this proxy serving tables until it has applied intent
// name, which the leader announces before it has committed it (so that
// revocation and commit overlap). If the intent never commits (the leader
// lost it), the revocation ends with the first renewal started after it
// arrived: every intent committed before that renewal is applied by then,
// and one enqueued before the revocation was sent and not committed
// before the renewal never will be.
func (m *Raft) RevokeIntent(tables []TableID, name string) {
	ts := make([]*raftTable, len(tables))
	for i, id := range tables {
		ts[i] = m.table(id)
	}
	m.revMu.Lock()
	defer m.revMu.Unlock()
	if _, applied := m.seen[name]; applied {
		return // its open is applied here: the intent itself stops serving
	}
	if m.revokes[name] != nil {
		return
	}
	for _, t := range ts {
		t.named.Add(1)
	}
	m.revokes[name] = &namedRevoke{tables: ts, at: m.now()}
}

// dropNamedRevokes ends the revocations by name that arrived before a
// renewal started at start, now applied.
func (m *Raft) dropNamedRevokes(start time.Duration) {
	m.revMu.Lock()
	defer m.revMu.Unlock()
	for name, r := range m.revokes {
		if r.at < start {
			delete(m.revokes, name)
			for _, t := range r.tables {
				t.named.Add(-1)
			}
		}
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
