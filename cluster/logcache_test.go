package cluster

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// failingStore fails every append with err.
type failingStore struct {
	raft.LogStore
	err error
}

func (s failingStore) StoreLogs([]*raft.Log) error { return s.err }

// The ring answers the newest entries, never an entry a truncation
// dropped, and the store's own errors pass through as they are (a
// proposer tells the leader's failed log write by them).
func TestRecentLogs(t *testing.T) {
	mem := raft.NewInmemStore()
	c := newRecentLogs(mem, 4)
	for i := uint64(1); i <= 6; i++ {
		if err := c.StoreLog(&raft.Log{Index: i, Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var l raft.Log
	for i := uint64(1); i <= 6; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("entry %d: %+v, %v", i, l, err)
		}
	}
	// A follower drops a tail and stores other entries at those indexes.
	if err := c.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(6, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 6 after its deletion: %+v, %v", l, err)
	}
	if err := c.StoreLogs([]*raft.Log{{Index: 5, Data: []byte{50}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(5, &l); err != nil || l.Data[0] != 50 {
		t.Fatalf("entry 5 rewritten: %+v, %v", l, err)
	}
	broken := errors.New("disk gone")
	f := newRecentLogs(failingStore{LogStore: mem, err: broken}, 4)
	if err := f.StoreLog(&raft.Log{Index: 6}); !errors.Is(err, broken) || !leaderLogFailed(err) {
		t.Fatalf("a failed append: %v", err)
	}
	if err := f.GetLog(6, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("a failed append was cached: %+v, %v", l, err)
	}
}
