package cluster

// Who leads, as this node knows it: Raft's state, and the leader's ID kept
// current from Raft's observations.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// IsLeader reports whether this node is the leader now, by its own
// (possibly stale) view; use it for duties (the binary-log watcher), never
// to answer a read.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// WaitLeader waits until the cluster has a leader.
func (n *Node) WaitLeader(ctx context.Context) error {
	for {
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// noteLeader reads the leader's ID from Raft after a change was observed.
// Observations may be dropped when they come faster than they are read,
// but then one is still waiting, and reading it reads the newest leader.
func (n *Node) noteLeader() {
	_, id := n.raft.LeaderWithID()
	s := string(id)
	if old := n.leaderID.Swap(&s); old == nil || *old != s {
		n.leaderChanges.Add(1)
		switch {
		case s == "":
			n.log.Info("cluster: no leader known", "term", n.raft.CurrentTerm())
		case s == n.cfg.ID:
			n.log.Info("cluster: this node leads", "term", n.raft.CurrentTerm())
		default:
			n.log.Info("cluster: leader", "leader", s, "term", n.raft.CurrentTerm())
		}
	}
}

// leaderChanged returns a channel that is closed when the leader changes.
func (n *Node) leaderChanged() <-chan struct{} {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	return n.leaderC
}

// watchLeader keeps leaderID current. It reads the leader once before the
// first observation: Raft runs from NewRaft on, and a restarted node often
// hears from the leader before its observer is registered; that change is
// never observed, and until the next one this node would trust no leader's
// word on the binary log (BinlogWatched) and serve nothing from memory.
func (n *Node) watchLeader(obs chan raft.Observation) {
	defer n.wg.Done()
	for {
		n.noteLeader()
		n.lmu.Lock()
		close(n.leaderC)
		n.leaderC = make(chan struct{})
		n.lmu.Unlock()
		select {
		case <-n.stop:
			return
		case <-obs:
		}
	}
}

// CaughtUp reports whether this node knows a leader and has applied what
// it knows to be committed, and if not, why: until then its leases and
// catalog may be behind the cluster's (a member restarted with its data
// directory replays and catches up).
func (n *Node) CaughtUp() (bool, string) {
	if *n.leaderID.Load() == "" {
		return false, "no leader known"
	}
	commit, _ := strconv.ParseUint(n.raft.Stats()["commit_index"], 10, 64)
	if applied := n.raft.AppliedIndex(); applied < commit {
		return false, fmt.Sprintf("applied the log to index %d of %d committed", applied, commit)
	}
	return true, ""
}
