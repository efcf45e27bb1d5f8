package cluster

// The newest entries of a voter's log, kept in memory. The leader reads
// every entry it sends back from its log store, once per follower and
// append, and the entry before them (for the follower's consistency
// check): raft-wal reads each with a pread. With three voters and 30
// sidecars, those reads were a quarter of an idle leader's CPU. A
// follower reads each entry back once more to apply it. hashicorp/raft's
// own LogCache does the same but wraps the store's errors into strings,
// and a proposer must still tell the leader's own log write failing
// (leaderLogFailed) by its error.

import (
	"sync"

	"github.com/hashicorp/raft"
)

// recentLogs is a log store with the entries stored last in a ring,
// indexed by entry index. An entry is only ever read from the ring if its
// slot still holds that index; DeleteRange (compaction, or a follower
// dropping a tail the leader does not have) empties the ring.
type recentLogs struct {
	raft.LogStore
	mu   sync.RWMutex
	ring []*raft.Log
}

func newRecentLogs(s raft.LogStore, capacity int) *recentLogs {
	return &recentLogs{LogStore: s, ring: make([]*raft.Log, capacity)}
}

func (c *recentLogs) GetLog(index uint64, l *raft.Log) error {
	c.mu.RLock()
	e := c.ring[index%uint64(len(c.ring))]
	c.mu.RUnlock()
	if e != nil && e.Index == index {
		*l = *e
		return nil
	}
	return c.LogStore.GetLog(index, l)
}

func (c *recentLogs) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *recentLogs) StoreLogs(ls []*raft.Log) error {
	if err := c.LogStore.StoreLogs(ls); err != nil {
		return err
	}
	c.mu.Lock()
	for _, l := range ls {
		c.ring[l.Index%uint64(len(c.ring))] = l
	}
	c.mu.Unlock()
	return nil
}

func (c *recentLogs) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	clear(c.ring)
	c.mu.Unlock()
	return c.LogStore.DeleteRange(lo, hi)
}

// IsMonotonic passes on the store's answer (Raft asks its log store).
func (c *recentLogs) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
