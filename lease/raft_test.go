package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLog commits instantly into m, as a one-node log would, unless down.
type fakeLog struct {
	m      *Raft
	mu     sync.Mutex
	index  uint64
	down   atomic.Bool
	lag    atomic.Bool // commit without applying here
	renews atomic.Int64
	// watched is what the proxy last told of the binary log.
	watched atomic.Bool
	opens   atomic.Int64
	closes  atomic.Int64
	opened  map[string][]TableID
	vers    map[TableID]Version
	ints    map[TableID]int
	// sent records the revocations sent to other proxies, by address;
	// deaf lists the addresses that never acknowledge, unreached the ones
	// a revocation fails to reach at once.
	sentMu    sync.Mutex
	sent      map[string][]Revocation
	deaf      map[string]bool
	unreached map[string]bool
	appended  map[string]uint64 // by node: the index it acknowledged the append of
}

var (
	t1 = TableID{"shop", "rates"}
	t2 = TableID{"shop", "branches"}
)

var errDown = errors.New("no leader")

func newFake(m *Raft) *fakeLog {
	return &fakeLog{m: m, opened: map[string][]TableID{}, vers: map[TableID]Version{}, ints: map[TableID]int{},
		sent: map[string][]Revocation{}, deaf: map[string]bool{}, unreached: map[string]bool{}, appended: map[string]uint64{}}
}

func (f *fakeLog) ID() string               { return "n1" }
func (f *fakeLog) Incarnation() uint64      { return 1 }
func (f *fakeLog) IsLeader() bool           { return true }
func (f *fakeLog) SetBinlogWatched(ok bool) { f.watched.Store(ok) }
func (f *fakeLog) BinlogWatched() bool      { return f.watched.Load() }

// AwaitAppended: the members in appended have stored the log up to the
// index in it; the others never do, so they are asked.
func (f *fakeLog) AwaitAppended(ctx context.Context, node string, index uint64) bool {
	f.sentMu.Lock()
	at, ok := f.appended[node]
	f.sentMu.Unlock()
	if ok && at >= index {
		return true
	}
	<-ctx.Done()
	return false
}

func (f *fakeLog) SendRevocation(ctx context.Context, addr string, r Revocation) error {
	f.sentMu.Lock()
	f.sent[addr] = append(f.sent[addr], r)
	deaf, unreached := f.deaf[addr], f.unreached[addr]
	f.sentMu.Unlock()
	if unreached {
		return errDown
	}
	if deaf {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeLog) commit(fn func()) error {
	_, err := f.commitAt(fn)
	return err
}

// commitAt commits fn and returns its index.
func (f *fakeLog) commitAt(fn func()) (uint64, error) {
	if f.lag.Load() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.index++ // committed, not applied here yet
		return f.index, nil
	}
	if f.down.Load() {
		return 0, errDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	f.index++
	f.m.Applied(f.index)
	return f.index, nil
}

func (f *fakeLog) state(id TableID) {
	if f.vers[id] == 0 {
		f.vers[id] = 1
	}
	f.m.TableState(id, f.vers[id], f.ints[id])
}

func (f *fakeLog) Renew(context.Context) (uint64, error) {
	f.renews.Add(1)
	return f.commitAt(func() {})
}

func (f *fakeLog) OpenIntent(_ context.Context, id string, ts []TableID) (uint64, error) {
	f.opens.Add(1)
	return f.commitAt(func() {
		f.opened[id] = ts
		for _, t := range ts {
			f.ints[t]++
			f.state(t)
		}
		f.m.IntentApplied(id)
	})
}

func (f *fakeLog) CloseIntent(_ context.Context, id string) error {
	f.closes.Add(1)
	return f.commit(func() {
		for _, t := range f.opened[id] {
			f.state(t)
			f.vers[t]++
			f.ints[t]--
			f.state(t)
		}
		delete(f.opened, id)
		f.m.IntentApplied(id)
	})
}

func (f *fakeLog) Bump(_ context.Context, ts []TableID) error {
	return f.commit(func() {
		for _, t := range ts {
			f.state(t)
			f.vers[t]++
			f.state(t)
		}
	})
}

// clock is a manual monotonic clock.
type clock struct{ d atomic.Int64 }

func (c *clock) now() time.Duration      { return time.Duration(c.d.Load()) }
func (c *clock) advance(d time.Duration) { c.d.Add(int64(d)) }

func newTestRaft(t *testing.T) (*Raft, *fakeLog, *clock) {
	return newTestRaftLinger(t, -1)
}

func newTestRaftLinger(t *testing.T, linger time.Duration) (*Raft, *fakeLog, *clock) {
	m := NewRaft(RaftConfig{Lease: time.Second, Margin: 100 * time.Millisecond, RenewEvery: time.Hour, OpenTimeout: 100 * time.Millisecond,
		Linger: linger})
	c := &clock{}
	c.d.Store(int64(time.Second))
	m.now = c.now
	f := newFake(m)
	m.log = f // renewals are driven by the test
	t.Cleanup(m.Close)
	return m, f, c
}

func TestRaftLeaseBoundsServing(t *testing.T) {
	m, _, c := newTestRaft(t)
	tb := m.Table(t1)
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable before any renewal")
	}
	m.renewOnce()
	if v, ok := tb.Servable(); !ok || v != 1 {
		t.Fatalf("after a renewal: %d %v", v, ok)
	}
	c.advance(899 * time.Millisecond)
	if _, ok := tb.Servable(); !ok {
		t.Fatal("not servable within lease minus margin")
	}
	c.advance(time.Millisecond)
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable at lease minus margin: the margin was not taken off")
	}
}

func TestRaftLeaseNeverGoesBackwards(t *testing.T) {
	m, f, c := newTestRaft(t)
	m.renewOnce()
	end := m.validUntil.Load()
	// A renewal that started earlier but finished later must not shorten it.
	m.now = func() time.Duration { return c.now() - 500*time.Millisecond }
	m.renewOnce()
	if m.validUntil.Load() != end {
		t.Fatalf("lease moved from %d to %d", end, m.validUntil.Load())
	}
	m.now = c.now
	f.down.Store(true)
	m.renewOnce()
	if m.validUntil.Load() != end {
		t.Fatal("a failed renewal changed the lease")
	}
}

func TestRaftIntentBlocksUntilClosed(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	var seen []Version
	var mu sync.Mutex
	m.Subscribe(func(id TableID, v Version) { mu.Lock(); seen = append(seen, v); mu.Unlock() })
	in, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable during an intent")
	}
	in.End()
	m.closers.Wait() // the close commits in the background
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after the write: %d %v", v, ok)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != 2 {
		t.Fatalf("subscribers saw %v", seen)
	}
	_ = f
}

func TestRaftIntentFailsWhenClusterIsDown(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.renewOnce()
	f.down.Store(true)
	if _, err := m.BeginWrite(context.Background(), t1); err == nil {
		t.Fatal("an intent opened without a log")
	}
	// The cache then invalidates; that fails too, so this proxy must stop
	// serving its copy until a bump commits.
	m.Invalidate(t1)
	if _, ok := m.Table(t1).Servable(); ok {
		t.Fatal("served a copy after a write whose bump could not commit")
	}
	f.down.Store(false)
	m.retryPending()
	if v, ok := m.Table(t1).Servable(); !ok || v != 2 {
		t.Fatalf("after the bump committed: %d %v", v, ok)
	}
}

func TestRaftRevokeWaitsForTheIntent(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	m.Revoke([]TableID{t1}, f.index+1)
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable after a revocation, before applying its intent")
	}
	_, _ = f.OpenIntent(context.Background(), "other", []TableID{t1})
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable with another proxy's intent open")
	}
	_ = f.CloseIntent(context.Background(), "other")
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after the other write: %d %v", v, ok)
	}
}

func TestRaftVersionsNeverGoBackwards(t *testing.T) {
	m, _, _ := newTestRaft(t)
	m.TableState(t1, 5, 0)
	m.TableState(t1, 3, 0) // a replay or an old snapshot
	if v := m.Table(t1).Version(); v != 5 {
		t.Fatalf("version %d", v)
	}
}

// A load that outlasts the lease is not thrown away: copies are tagged with
// versions, not leases, so once the lease is renewed the copy is served
// (TiDB's reload-forever bug cannot happen).
func TestRaftLongLoadIsKept(t *testing.T) {
	m, _, c := newTestRaft(t)
	m.renewOnce()
	v, _ := m.Table(t1).Servable()
	c.advance(5 * time.Second) // the load took five leases
	if _, ok := m.Table(t1).Servable(); ok {
		t.Fatal("servable after the lease expired")
	}
	var asked atomic.Int64
	m.Subscribe(func(TableID, Version) { asked.Add(1) })
	m.renewOnce()
	if v2, ok := m.Table(t1).Servable(); !ok || v2 != v {
		t.Fatalf("after renewal: %d %v, want the loaded version %d", v2, ok, v)
	}
	if asked.Load() == 0 {
		t.Fatal("regaining the lease did not ask the cache to load what it skipped")
	}
}

// A proxy whose renewal commits before it has applied the entries ahead of
// it (it lagged while its lease was out, so no revocation reached it) gets
// no lease until it has caught up.
func TestRaftRenewalWaitsForTheLogToCatchUp(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.cfg.Lease = 40 * time.Millisecond
	f.lag.Store(true)
	m.renewOnce()
	if m.LeaseValid() {
		t.Fatal("a lease from a renewal this proxy has not applied")
	}
}

// Writes to the same table share one intent: a write that starts while
// another holds it, or within Linger of the last one ending, opens
// nothing; the table stays unservable throughout and its version goes up
// once, when the shared intent closes.
func TestRaftWritesShareAnIntent(t *testing.T) {
	m, f, _ := newTestRaftLinger(t, 50*time.Millisecond)
	m.renewOnce()
	tb := m.Table(t1)
	ctx := context.Background()
	a, err := m.BeginWrite(ctx, t1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.BeginWrite(ctx, t1, t2) // t1 shared, t2 opened
	if err != nil {
		t.Fatal(err)
	}
	if got := f.opens.Load(); got != 2 {
		t.Fatalf("%d opens, want 2 (t1 once, t2 once)", got)
	}
	a.End()
	b.End()
	c, err := m.BeginWrite(ctx, t1) // within the linger: joins
	if err != nil {
		t.Fatal(err)
	}
	if got := f.opens.Load(); got != 2 {
		t.Fatalf("a write within the linger opened a new intent (%d opens)", got)
	}
	c.End()
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable while the shared intent lingers")
	}
	waitFor(t, func() bool { v, ok := tb.Servable(); return ok && v == 2 })
	// t1 and t2 linger on timers of their own, so t2's close may land a
	// moment after t1 is servable again; a third close would be a bug.
	waitFor(t, func() bool { return f.closes.Load() >= 2 })
	time.Sleep(100 * time.Millisecond)
	if got := f.closes.Load(); got != 2 {
		t.Fatalf("%d closes, want 2", got)
	}
	// Once closed, the next write opens anew.
	d, err := m.BeginWrite(ctx, t1)
	if err != nil {
		t.Fatal(err)
	}
	d.End()
	if got := f.opens.Load(); got != 3 {
		t.Fatalf("%d opens after the linger, want 3", got)
	}
}

// An intent that has opened is not joined once this proxy's lease has run
// out (it may have been removed, and its intents closed by the leader):
// the write opens its own.
func TestRaftNoSharingWithoutALease(t *testing.T) {
	m, f, c := newTestRaftLinger(t, time.Hour)
	m.renewOnce()
	a, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	a.End()
	c.advance(2 * time.Second)
	b, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	b.End()
	if got := f.opens.Load(); got != 2 {
		t.Fatalf("%d opens, want 2: joined an intent without a lease", got)
	}
}

// Close commits the close of an intent that lingers, so other proxies do
// not wait for this one to restart.
func TestRaftCloseEndsLingeringIntents(t *testing.T) {
	m, f, _ := newTestRaftLinger(t, time.Hour)
	m.renewOnce()
	a, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	a.End()
	m.Close()
	if f.closes.Load() != 1 || len(f.opened) != 0 {
		t.Fatalf("after Close: %d closes, %d intents open", f.closes.Load(), len(f.opened))
	}
}

// A revocation by name (sent while its intent commits) holds until the
// intent is applied; one that arrives after it changes nothing; one whose
// intent never commits ends with the next renewal started after it.
func TestRaftRevokeByIntentName(t *testing.T) {
	m, f, c := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	m.RevokeIntent([]TableID{t1}, "x")
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable after a revocation by name")
	}
	_, _ = f.OpenIntent(context.Background(), "x", []TableID{t1})
	_ = f.CloseIntent(context.Background(), "x")
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after the intent's open and close: %d %v", v, ok)
	}
	m.RevokeIntent([]TableID{t1}, "x") // late: already applied
	if _, ok := tb.Servable(); !ok {
		t.Fatal("a revocation of an applied intent stopped serving")
	}
	m.RevokeIntent([]TableID{t1}, "lost")
	m.renewOnce() // started at the same instant: does not count
	if _, ok := tb.Servable(); ok {
		t.Fatal("a renewal that did not start after the revocation ended it")
	}
	c.advance(time.Millisecond)
	m.renewOnce()
	if _, ok := tb.Servable(); !ok {
		t.Fatal("the revocation of an intent that never committed outlived a later renewal")
	}
}

// renewHook is the fake log with before called as a renewal starts,
// after the renewer took its start time.
type renewHook struct {
	*fakeLog
	before func()
}

func (r renewHook) Renew(ctx context.Context) (uint64, error) {
	r.before()
	return r.fakeLog.Renew(ctx)
}

// An intent's open stored twice (the leader that appended the first copy
// lost it, and the writer's retry reached the next leader) keeps its tables
// off memory until a renewal started after the second store is applied: a
// renewal that started between the two may commit before the retried open,
// which commits next and lets the write go on, since this proxy stored it.
func TestRaftRevokeByIntentNameStoredAgain(t *testing.T) {
	m, f, c := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	m.RevokeIntent([]TableID{t1}, "x") // the copy the leader loses
	c.advance(time.Millisecond)
	m.log = renewHook{fakeLog: f, before: func() {
		c.advance(time.Millisecond)
		m.RevokeIntent([]TableID{t1}, "x") // the retried open, stored after the renewal started
	}}
	m.renewOnce() // appended before the retried open
	if _, ok := tb.Servable(); ok {
		t.Fatal("a renewal started before the intent's open was stored again ended its revocation")
	}
	m.log = f
	_, _ = f.OpenIntent(context.Background(), "x", []TableID{t1})
	_ = f.CloseIntent(context.Background(), "x")
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after the intent's open and close: %d %v", v, ok)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// The leader does not ask the writer to stop serving: the writer keeps its
// own copy off after its write ended until it has applied the open, which
// the log may have committed without this proxy applying it yet.
func TestRaftWriterWaitsToApplyItsOwnOpen(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	f.lag.Store(true) // commits, without applying here
	in, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	open := f.index
	in.End()
	if _, ok := tb.Servable(); ok {
		t.Fatal("the writer served its old copy after its write, before applying the write's intent")
	}
	m.Applied(open - 1)
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable before the open is applied")
	}
	m.TableState(t1, 1, 1) // the open, applied
	m.Applied(open)
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable with the intent open")
	}
	m.TableState(t1, 2, 0) // the close
	m.Applied(open + 1)
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after the close: %d %v", v, ok)
	}
}

// A version bump that could not be committed is a change the other proxies
// were not told of: until it commits, this proxy says the binary log is
// not watched, whatever its follower says.
func TestRaftPendingBumpUnwatchesTheLog(t *testing.T) {
	m, f, _ := newTestRaft(t)
	m.SetBinlogWatched(true)
	if !f.watched.Load() {
		t.Fatal("the follower's word was not passed on")
	}
	f.down.Store(true)
	m.Invalidate(t1)
	if f.watched.Load() {
		t.Fatal("watched while a bump is pending")
	}
	m.SetBinlogWatched(true) // the follower is still caught up
	if f.watched.Load() {
		t.Fatal("the follower's word overrode a pending bump")
	}
	f.down.Store(false)
	m.retryPending()
	if !f.watched.Load() {
		t.Fatal("not watched again once the bump committed")
	}
	m.SetBinlogWatched(false)
	if f.watched.Load() {
		t.Fatal("the follower's stall was not passed on")
	}
}
