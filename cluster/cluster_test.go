package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"tableproxy/lease"
)

// member is a node and the lease manager on top of it, as a proxy has.
type member struct {
	n *Node
	m *lease.Raft
}

// hungLeases answers revocations only once hung is closed, as a paused
// proxy's would.
type hungLeases struct {
	*lease.Raft
	hung chan struct{}
}

func (h hungLeases) Revoke(ts []lease.TableID, i uint64) { <-h.hung; h.Raft.Revoke(ts, i) }

func (h hungLeases) RevokeIntent(ts []lease.TableID, name string) {
	<-h.hung
	h.Raft.RevokeIntent(ts, name)
}

var testLease = lease.RaftConfig{Lease: 600 * time.Millisecond, Margin: 100 * time.Millisecond,
	RenewEvery: 100 * time.Millisecond, OpenTimeout: 3 * time.Second}

func startMember(t *testing.T, id, dir, join string) *member {
	t.Helper()
	return startMemberHung(t, id, dir, join, nil)
}

// startMemberHung starts a member whose answers to revocations wait until
// hung is closed (nil: they do not wait), as a paused proxy's would.
func startMemberHung(t *testing.T, id, dir, join string, hung chan struct{}) *member {
	t.Helper()
	return startMemberCfg(t, Config{ID: id, DataDir: dir, Join: join}, hung)
}

// startMemberCfg starts a member with cfg's ID, DataDir, Join, NonVoter and
// DeadAfter, and the tests' timings.
func startMemberCfg(t *testing.T, cfg Config, hung chan struct{}) *member {
	t.Helper()
	m := lease.NewRaft(testLease)
	var leases Leases = m
	if hung != nil {
		leases = hungLeases{Raft: m, hung: hung}
	}
	if cfg.RaftListen == "" {
		cfg.RaftListen = "127.0.0.1:0"
	}
	cfg.Leases = leases
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start(n)
	mb := &member{n: n, m: m}
	t.Cleanup(mb.close)
	return mb
}

func (mb *member) close() {
	mb.m.Close()
	mb.n.Close()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func threeNodes(t *testing.T) []*member {
	a := startMember(t, "a", t.TempDir(), "")
	waitUntil(t, 5*time.Second, "a leads", a.n.IsLeader)
	b := startMember(t, "b", t.TempDir(), a.n.Addr())
	c := startMember(t, "c", t.TempDir(), b.n.Addr()) // joining through a follower works too
	ms := []*member{a, b, c}
	waitUntil(t, 10*time.Second, "three members with leases", func() bool {
		list, _ := a.n.Members()
		if len(list) != 3 {
			return false
		}
		for _, mb := range ms {
			if !mb.m.LeaseValid() {
				return false
			}
		}
		return true
	})
	return ms
}

func servable(mb *member, id lease.TableID) bool {
	_, ok := mb.m.Table(id).Servable()
	return ok
}

func TestWriteRevokesEveryProxy(t *testing.T) {
	ms := threeNodes(t)
	for _, mb := range ms {
		waitUntil(t, 2*time.Second, "servable", func() bool { return servable(mb, tA) })
	}
	writer := ms[2] // a follower
	start := time.Now()
	in, err := writer.m.BeginWrite(context.Background(), tA)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for i, mb := range ms {
		if servable(mb, tA) {
			t.Fatalf("member %d still serves %v while a write intent is open", i, tA)
		}
	}
	if took > 200*time.Millisecond {
		t.Errorf("opening an intent with every proxy healthy took %s; revocation should not wait out leases", took)
	}
	in.End()
	for i, mb := range ms {
		waitUntil(t, 2*time.Second, "new version servable", func() bool {
			v, ok := mb.m.Table(tA).Servable()
			return ok && v == 2
		})
		_ = i
	}
}

// A proxy whose process is gone (its cluster address refuses connections)
// serves nothing: a write does not wait out its lease.
func TestDeadProxyIsNotWaitedOut(t *testing.T) {
	ms := threeNodes(t)
	ms[1].close()
	start := time.Now()
	in, err := ms[0].m.BeginWrite(context.Background(), tB)
	if err != nil {
		t.Fatal(err)
	}
	in.End()
	if took := time.Since(start); took > testLease.Hold()/2 {
		t.Errorf("write took %s with one proxy gone, want well under its lease (%s)", took, testLease.Hold())
	}
}

// A proxy that holds a lease and does not answer (paused, partitioned) is
// waited out until its lease has expired, and no longer.
func TestHungProxyIsWaitedOut(t *testing.T) {
	a := startMember(t, "a", t.TempDir(), "")
	waitUntil(t, 5*time.Second, "a leads", a.n.IsLeader)
	hung := make(chan struct{})
	defer close(hung)
	// b hangs as a paused proxy would: it neither stores appends (its log
	// store stops its copies first, which hangs) nor answers revocations;
	// a and c commit without it.
	startMember(t, "c", t.TempDir(), a.n.Addr())
	b := startMemberHung(t, "b", t.TempDir(), a.n.Addr(), hung)
	waitUntil(t, 10*time.Second, "b holds a lease", b.m.LeaseValid)
	start := time.Now()
	in, err := a.m.BeginWrite(context.Background(), tB)
	if err != nil {
		t.Fatal(err)
	}
	in.End()
	took := time.Since(start)
	// b renewed at most RenewEvery (plus a commit) before the write.
	if least := testLease.Hold() - testLease.RenewEvery - 50*time.Millisecond; took < least {
		t.Errorf("write took %s with a proxy not answering; it must wait out its lease (at least %s)", took, least)
	}
	if took > testLease.Hold()+300*time.Millisecond {
		t.Errorf("write took %s with a proxy not answering, want at most about lease + margin (%s)", took, testLease.Hold())
	}
}

func TestJoinIsIdempotentAndRemoveNode(t *testing.T) {
	ms := threeNodes(t)
	leader := ms[0]
	jr := joinRequest{ID: "b", Addr: ms[1].n.Addr(), Voter: true}
	if err := leader.n.addMember(context.Background(), jr); err != nil {
		t.Fatal(err)
	}
	if list, _ := leader.n.Members(); len(list) != 3 {
		t.Fatalf("a repeated join changed the membership: %+v", list)
	}
	ms[2].close()
	if err := ms[1].n.RemoveNode(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if list, _ := leader.n.Members(); len(list) != 2 {
		t.Fatalf("after removing c: %+v", list)
	}
	if err := leader.n.RemoveNode(context.Background(), "zz"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("removing an unknown node: %v", err)
	}
}

func TestLeaderFailoverKeepsWritesSafe(t *testing.T) {
	ms := threeNodes(t)
	ms[0].close() // the leader
	start := time.Now()
	in, err := ms[1].m.BeginWrite(context.Background(), tA)
	if err != nil {
		t.Fatal(err)
	}
	if servable(ms[2], tA) {
		t.Fatal("a follower serves a table with an open intent after failover")
	}
	in.End()
	t.Logf("write across a leader failover took %s", time.Since(start))
	waitUntil(t, 3*time.Second, "served again after failover", func() bool { return servable(ms[2], tA) })
}

func TestRestartKeepsVersions(t *testing.T) {
	dir := t.TempDir()
	a := startMember(t, "a", dir, "")
	waitUntil(t, 5*time.Second, "leader", a.n.IsLeader)
	for i := 0; i < 3; i++ {
		if err := a.n.Bump(context.Background(), []lease.TableID{tA}); err != nil {
			t.Fatal(err)
		}
	}
	a.close()
	a2 := startMember(t, "a", dir, "")
	waitUntil(t, 5*time.Second, "recovered", func() bool { return a2.m.Table(tA).Version() == 4 })
}

// A removed node no longer receives the log: it must lose its lease even
// if it keeps running and renewing.
func TestRemovedNodeLosesItsLease(t *testing.T) {
	ms := threeNodes(t)
	if err := ms[0].n.RemoveNode(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "c's lease to run out", func() bool { return !ms[2].m.LeaseValid() })
	time.Sleep(testLease.Lease)
	if ms[2].m.LeaseValid() {
		t.Fatal("a removed node renewed its lease")
	}
}

// A bump of a table with an open intent (the binary log reporting a write
// made under it) costs no commit of its own, but still raises the version
// once the intent has closed.
func TestDeferredBumpStillBumps(t *testing.T) {
	ms := threeNodes(t)
	in, err := ms[2].m.BeginWrite(context.Background(), tA)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms[1].n.Bump(context.Background(), []lease.TableID{tA}); err != nil { // through a follower
		t.Fatal(err)
	}
	if ms[0].n.deferred.Load() != 1 {
		t.Error("a bump under an open intent was committed on its own")
	}
	in.End()
	for _, mb := range ms {
		waitUntil(t, 3*time.Second, "the close and the deferred bump", func() bool {
			v, ok := mb.m.Table(tA).Servable()
			return ok && v == 3
		})
	}
}

// Every member answers from memory only while the current leader says it
// follows the binary log: a leader's word ends with its term, and a
// follower's word counts for nothing.
func TestBinlogWatchedFollowsTheLeader(t *testing.T) {
	ms := threeNodes(t)
	var lead *member
	var others []*member
	for _, mb := range ms {
		if mb.n.IsLeader() {
			lead = mb
		} else {
			others = append(others, mb)
		}
	}
	if lead == nil {
		t.Skip("no leader now (an election); the rule is covered by TestFSMBinlogWordAndItsTerm")
	}
	live := ms
	watched := func(want bool) func() bool {
		return func() bool {
			for _, mb := range live {
				if mb.m.BinlogWatched() != want {
					return false
				}
			}
			return true
		}
	}
	for _, mb := range others {
		mb.m.SetBinlogWatched(true) // followers: not the leader's word
	}
	time.Sleep(300 * time.Millisecond)
	if !watched(false)() {
		t.Fatal("a follower's word made the log watched")
	}
	lead.m.SetBinlogWatched(true)
	waitUntil(t, 2*time.Second, "watched everywhere once the leader says so", watched(true))
	lead.m.SetBinlogWatched(false)
	waitUntil(t, 2*time.Second, "unwatched everywhere once the leader says its stream stalled", watched(false))
	lead.m.SetBinlogWatched(true)
	waitUntil(t, 2*time.Second, "watched again", watched(true))

	// The leader goes: the survivors must not trust its word in the next
	// term, whatever they said before, until the new leader says it.
	for _, mb := range others {
		mb.m.SetBinlogWatched(false)
	}
	lead.close()
	live = others
	var next *member
	waitUntil(t, 5*time.Second, "a new leader", func() bool {
		for _, mb := range others {
			if mb.n.IsLeader() {
				next = mb
				return true
			}
		}
		return false
	})
	waitUntil(t, 3*time.Second, "unwatched under the new leader", watched(false))
	next.m.SetBinlogWatched(true)
	waitUntil(t, 2*time.Second, "watched once the new leader says so", watched(true))
}

// TestLeaderLearnedBeforeObservingIsNoted: a node that learns its leader
// between starting Raft and registering its observer gets no observation
// of it; its leader watcher must read the leader when it starts, or the
// node trusts no word on the binary log until the leader changes again.
func TestLeaderLearnedBeforeObservingIsNoted(t *testing.T) {
	ms := threeNodes(t)
	var follower *member
	for _, mb := range ms {
		if !mb.n.IsLeader() {
			follower = mb
		}
	}
	_, leader := follower.n.raft.LeaderWithID()
	if leader == "" {
		t.Skip("no leader now (an election)")
	}
	// As if the observation of the leader had come before the observer.
	follower.n.leaderID.Store(new(string))
	follower.n.wg.Add(1)
	go follower.n.watchLeader(make(chan raft.Observation))
	waitUntil(t, time.Second, "the leader noted", func() bool { return *follower.n.leaderID.Load() == string(leader) })
}

// A member that has just joined says it has caught up (lease.Raft.CaughtUp)
// only once it has applied the catalog committed before it started: until
// then its proxy cannot tell a cached table from another, and holds its
// statements (see cache.Plugin.awaitCatalog).
func TestJoinedMemberCaughtUpKnowsTheCatalog(t *testing.T) {
	a := startMember(t, "a", t.TempDir(), "")
	waitUntil(t, 5*time.Second, "a leads", a.n.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 200; i++ { // a log to catch up with
		if err := a.n.Bump(ctx, []lease.TableID{tB}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.n.CacheTable(ctx, CatalogEntry{Schema: tA.Schema, Table: tA.Table, CachedBy: "u"}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"b", "c", "d"} {
		s := startMemberCfg(t, Config{ID: id, DataDir: t.TempDir(), Join: a.n.Addr(), NonVoter: i%2 == 0}, nil)
		select {
		case <-s.m.CaughtUp():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never caught up", id)
		}
		if cat := s.n.Catalog(); len(cat) != 1 || cat[0].ID() != tA {
			t.Fatalf("%s caught up with the catalog %v", id, cat)
		}
	}
}

// A table cached while the cluster runs is pending until every member has
// said it has learned of it, or is gone: a member whose cache says nothing
// keeps it pending (here for a second, several renewals), the moment it
// says so the leader marks it ready (bumping its version), and a member
// that is gone does not hold it up.
func TestCachedTableReadyOnceEveryMemberLearned(t *testing.T) {
	ms := threeNodes(t)
	a, b, c := ms[0], ms[1], ms[2]
	b.n.TrackLearned()
	c.n.TrackLearned()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending := func(mb *member) (CatalogEntry, bool) {
		for _, e := range mb.n.Catalog() {
			if e.ID() == tA {
				return e, e.Pending
			}
		}
		t.Fatalf("%s: %v is not in the catalog", mb.n.ID(), tA)
		return CatalogEntry{}, false
	}
	if err := a.n.CacheTable(ctx, CatalogEntry{Schema: tA.Schema, Table: tA.Table, CachedBy: "u"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "b applies the entry", func() bool { return len(b.n.Catalog()) == 1 })
	e, _ := pending(b)
	v := b.m.Table(tA).Version()
	time.Sleep(time.Second)
	if _, p := pending(a); !p {
		t.Fatal("ready before b and c said they learned of it")
	}
	if w := a.n.membersLearned(e.Index).waiting(e.Index); len(w) != 2 {
		t.Fatalf("waiting for %v, want b and c", w)
	}
	b.n.SetLearned(e.Index)
	time.Sleep(time.Second)
	if _, p := pending(a); !p {
		t.Fatal("ready before c said it learned of it")
	}
	// c goes away without a word: once its lease has run out by the
	// leader's clock and nothing answers at its address, it is not waited
	// for.
	c.close()
	waitUntil(t, 10*time.Second, "the entry is ready on b", func() bool { _, p := pending(b); return !p })
	if got := b.m.Table(tA).Version(); got <= v {
		t.Fatalf("version %d after the ready entry, %d before", got, v)
	}
}
