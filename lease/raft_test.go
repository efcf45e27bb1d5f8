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
	opened map[string][]TableID
	vers   map[TableID]Version
	ints   map[TableID]int
}

var errDown = errors.New("no leader")

func newFake(m *Raft) *fakeLog {
	return &fakeLog{m: m, opened: map[string][]TableID{}, vers: map[TableID]Version{}, ints: map[TableID]int{}}
}

func (f *fakeLog) ID() string          { return "n1" }
func (f *fakeLog) Incarnation() uint64 { return 1 }
func (f *fakeLog) IsLeader() bool      { return true }

func (f *fakeLog) commit(fn func()) error {
	if f.lag.Load() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.index++ // committed, not applied here yet
		return nil
	}
	if f.down.Load() {
		return errDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	f.index++
	f.m.Applied(f.index)
	return nil
}

func (f *fakeLog) state(id TableID) {
	if f.vers[id] == 0 {
		f.vers[id] = 1
	}
	f.m.TableState(id, f.vers[id], f.ints[id])
}

func (f *fakeLog) Renew(context.Context) (uint64, error) {
	f.renews.Add(1)
	err := f.commit(func() {})
	return f.index, err
}

func (f *fakeLog) OpenIntent(_ context.Context, id string, ts []TableID) error {
	return f.commit(func() {
		f.opened[id] = ts
		for _, t := range ts {
			f.ints[t]++
			f.state(t)
		}
	})
}

func (f *fakeLog) CloseIntent(_ context.Context, id string) error {
	return f.commit(func() {
		for _, t := range f.opened[id] {
			f.state(t)
			f.vers[t]++
			f.ints[t]--
			f.state(t)
		}
		delete(f.opened, id)
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
	m := NewRaft(RaftConfig{Lease: time.Second, Margin: 100 * time.Millisecond, RenewEvery: time.Hour, OpenTimeout: 100 * time.Millisecond})
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
	m.wg.Wait() // the close commits in the background
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
	_ = f.OpenIntent(context.Background(), "other", []TableID{t1})
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
