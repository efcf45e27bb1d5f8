package cluster

// Tests of the one change in the copy of hashicorp/raft this module builds
// with (third_party/hashicorp-raft/PATCH.md): the leader writes its log in
// parallel with replication and counts itself in the quorum only once its
// write has returned.

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hookedStore is a log store whose StoreLogs runs a hook first, while the
// hook is set; the tests set it on the leader only.
type hookedStore struct {
	*raft.InmemStore
	mu   sync.Mutex
	hook func([]*raft.Log) error
}

func (s *hookedStore) setHook(h func([]*raft.Log) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

func (s *hookedStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h != nil {
		if err := h(logs); err != nil {
			return err
		}
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *hookedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// IsMonotonic makes the store behave like raft-wal, the store this module
// uses: a snapshot installed on it removes the whole log.
func (s *hookedStore) IsMonotonic() bool { return true }

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

type testRaft struct {
	r     *raft.Raft
	store *hookedStore
	trans *raft.InmemTransport
}

// newTestRafts starts three voters on in-memory transports and returns them
// with the index of the leader.
func newTestRafts(t *testing.T) ([]*testRaft, int) {
	t.Helper()
	nodes := make([]*testRaft, 3)
	var servers []raft.Server
	for i := range nodes {
		id := raft.ServerID(fmt.Sprintf("n%d", i))
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(id))
		nodes[i] = &testRaft{store: &hookedStore{InmemStore: raft.NewInmemStore()}, trans: trans}
		servers = append(servers, raft.Server{ID: id, Address: addr})
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for i, n := range nodes {
		c := raft.DefaultConfig()
		c.LocalID = servers[i].ID
		c.HeartbeatTimeout = 100 * time.Millisecond
		c.ElectionTimeout = 100 * time.Millisecond
		c.LeaderLeaseTimeout = 100 * time.Millisecond
		c.CommitTimeout = 5 * time.Millisecond
		c.Logger = hclog.NewNullLogger()
		r, err := raft.NewRaft(c, nopFSM{}, n.store, raft.NewInmemStore(), raft.NewInmemSnapshotStore(), n.trans)
		if err != nil {
			t.Fatal(err)
		}
		n.r = r
		t.Cleanup(func() { r.Shutdown().Error() })
	}
	if err := nodes[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	return nodes, waitLeader(t, nodes, -1)
}

// waitLeader waits for a leader other than not.
func waitLeader(t *testing.T, nodes []*testRaft, not int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for i, n := range nodes {
			if i != not && n.r.State() == raft.Leader {
				return i
			}
		}
	}
	t.Fatal("no leader elected")
	return -1
}

func lastStored(t *testing.T, s *hookedStore) uint64 {
	t.Helper()
	i, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// The followers receive and store an entry while the leader's own write of
// it is still running. Upstream, the leader wrote first and then replicated.
func TestLeaderReplicatesWhileItWrites(t *testing.T) {
	nodes, leader := newTestRafts(t)
	var followers []*testRaft
	for i, n := range nodes {
		if i != leader {
			followers = append(followers, n)
		}
	}
	seen := make(chan bool, 1)
	nodes[leader].store.setHook(func(logs []*raft.Log) error {
		want := logs[len(logs)-1].Index
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, f := range followers {
				if lastStored(t, f.store) >= want {
					seen <- true
					return nil
				}
			}
		}
		seen <- false
		return nil
	})
	if err := nodes[leader].r.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if !<-seen {
		t.Fatal("no follower stored the entry while the leader was writing it")
	}
}

// With one follower cut off, an entry cannot commit before the leader's own
// write has returned: the leader and that follower are the only majority.
func TestLeaderCountsItselfOnlyOnceWritten(t *testing.T) {
	nodes, leader := newTestRafts(t)
	cut := (leader + 1) % 3
	other := (leader + 2) % 3
	nodes[leader].trans.Disconnect(nodes[cut].trans.LocalAddr())
	nodes[cut].trans.DisconnectAll()

	release := make(chan struct{})
	nodes[leader].store.setHook(func([]*raft.Log) error { <-release; return nil })
	before := lastStored(t, nodes[other].store)
	f := nodes[leader].r.Apply([]byte("x"), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()

	// Wait until the reachable follower has the entry: from then on only the
	// leader's own write stands between the entry and its commit.
	for deadline := time.Now().Add(5 * time.Second); lastStored(t, nodes[other].store) <= before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the follower never received the entry")
		}
	}
	select {
	case err := <-done:
		close(release)
		t.Fatalf("the entry committed (err %v) while the leader's write had not returned", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A failed write on the leader fails the entry and steps it down without
// leaving it claiming entries its store does not have; the cluster goes on.
func TestLeaderWriteFailureStepsDown(t *testing.T) {
	nodes, leader := newTestRafts(t)
	l := nodes[leader]
	broken := errors.New("disk gone")
	l.store.setHook(func([]*raft.Log) error { return broken })

	// The followers may have the entry and commit it: its outcome is
	// unknown, which callers retry as they do a lost leadership.
	if err := l.r.Apply([]byte("x"), 5*time.Second).Error(); !errors.Is(err, broken) || !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("apply on a leader whose write fails: %v", err)
	}
	if got, stored := l.r.LastIndex(), lastStored(t, l.store); got > stored {
		t.Fatalf("the old leader's last index is %d, its store ends at %d", got, stored)
	}
	l.store.setHook(nil)

	next := waitLeader(t, nodes, -1)
	if err := nodes[next].r.Apply([]byte("y"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	// Every node, the old leader included, catches up on the new leader's
	// log, whatever became of the failed entry.
	want := nodes[next].r.LastIndex()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if lastStored(t, l.store) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old leader's store ends at %d, the new leader's log at %d", lastStored(t, l.store), want)
		}
	}
}

// A replicator that saw a batch staged and reads it after the leader's write
// of it failed must not take the missing entry for a compacted one and send
// the leader's older snapshot: a follower in the same term would install it
// and drop the newer entries it had acknowledged.
func TestLeaderWriteFailureSendsNoOldSnapshot(t *testing.T) {
	nodes, leader := newTestRafts(t)
	l, f := nodes[leader], nodes[(leader+1)%3]
	apply := func(n int, data string) {
		for i := 0; i < n; i++ {
			if err := l.r.Apply([]byte(data), time.Second).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(10, "a")
	if err := l.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	apply(10, "b")
	time.Sleep(100 * time.Millisecond)
	acked := lastStored(t, f.store)

	// Cut f off so that its replicator backs off, holding a last index
	// that will include the failed batch when it retries.
	l.trans.Disconnect(f.trans.LocalAddr())
	l.r.Apply([]byte("c"), time.Second).Error()
	time.Sleep(50 * time.Millisecond)
	var failed atomic.Bool
	l.store.setHook(func([]*raft.Log) error {
		if failed.Swap(true) {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
		l.trans.Connect(f.trans.LocalAddr(), f.trans)
		return errors.New("disk gone")
	})
	l.r.Apply([]byte("d"), time.Second).Error()
	time.Sleep(2 * time.Second)
	if last := lastStored(t, f.store); last < acked {
		t.Fatalf("the follower's log ends at %d: it had acknowledged up to %d", last, acked)
	}
}
