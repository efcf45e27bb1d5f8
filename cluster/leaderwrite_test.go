package cluster

// A leader whose own log write fails: Raft fails the entry and steps the
// leader down, and the proposal is retried through the next leader.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
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

// A failed write on the leader fails the entry and steps it down without
// leaving it claiming entries its store does not have; the cluster goes on.
func TestLeaderWriteFailureStepsDown(t *testing.T) {
	nodes, leader := newTestRafts(t)
	l := nodes[leader]
	broken := errors.New("disk gone")
	l.store.setHook(func([]*raft.Log) error { return broken })

	// The proposal is retried, as one whose leader was deposed.
	if err := applyError(context.Background(), l.r.Apply([]byte("x"), 5*time.Second).Error()); !errors.Is(err, broken) || !retryable(err) {
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
