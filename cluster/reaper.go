package cluster

// Membership that stays bounded when sidecars come and go: the leader
// removes a non-voter that has not renewed its lease for DeadAfter, by its
// own clock, and a non-voter that stops cleanly asks to be removed at once
// (Leave). Voters are removed only by an admin (ADMIN CLUSTER REMOVE NODE):
// removing one changes the quorum, which no timer should decide.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// reapState is the leader's bookkeeping for removals, guarded by Node.rmu.
type reapState struct {
	// seen is when this node, as leader, first saw each member (or added
	// it): a member that has renewed nothing since counts as silent from
	// then, so a new leader, or a member added a moment ago, is not taken
	// for dead before DeadAfter has passed on this node's clock.
	seen map[string]time.Time
	// leaving lists the members removing themselves (Leave) right now.
	leaving map[string]bool
}

// silence is how long member id has been silent as this leader sees it:
// since it applied the member's last renewal, or since it first saw the
// member, whichever is later. n.rmu is held.
func (n *Node) silenceLocked(id string, now time.Time) time.Duration {
	if n.reap.seen == nil {
		n.reap.seen = map[string]time.Time{}
	}
	first, ok := n.reap.seen[id]
	if !ok {
		first = now
		n.reap.seen[id] = now
	}
	quiet := now.Sub(first)
	if since, ok := n.cfg.Leases.SinceRenewal(id); ok && since < quiet {
		quiet = since
	}
	return quiet
}

// sawMember restarts id's count of silence (it was just added).
func (n *Node) sawMember(id string) {
	n.rmu.Lock()
	defer n.rmu.Unlock()
	if n.reap.seen == nil {
		n.reap.seen = map[string]time.Time{}
	}
	n.reap.seen[id] = time.Now()
}

// reapDead removes, while this node leads, the non-voters silent for
// DeadAfter. It runs a few times per DeadAfter (see Open), so a dead
// member goes at most a quarter of DeadAfter (and at most a second) late.
func (n *Node) reapDead(newTerm bool) {
	if newTerm {
		// A new term of leading: count silences from now, by this
		// node's clock, for members whose renewals it never applied.
		n.rmu.Lock()
		n.reap.seen = map[string]time.Time{}
		n.rmu.Unlock()
	}
	for _, id := range n.deadNonVoters(time.Now()) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.RemoveNode(ctx, id)
		cancel()
		if err != nil {
			n.log.Warn("cluster: could not remove a non-voter that stopped renewing its lease", "id", id, "err", err)
			continue
		}
		n.log.Info("cluster: removed a non-voter that stopped renewing its lease", "id", id, "dead_after", n.cfg.DeadAfter)
	}
}

// whileLeading calls duty every period while this node leads, telling it
// when a term of leading has just begun, until the node stops.
func (n *Node) whileLeading(period time.Duration, duty func(newTerm bool)) {
	defer n.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	leading := false
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.raft.State() != raft.Leader {
			leading = false
			continue
		}
		duty(!leading)
		leading = true
	}
}

// deadNonVoters lists the non-voters silent for DeadAfter, and forgets
// the bookkeeping of members no longer in the configuration.
func (n *Node) deadNonVoters(now time.Time) []string {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	n.rmu.Lock()
	defer n.rmu.Unlock()
	in := map[string]bool{}
	var dead []string
	for _, s := range cf.Configuration().Servers {
		id := string(s.ID)
		in[id] = true
		if s.Suffrage == raft.Voter || id == n.cfg.ID || n.reap.leaving[id] {
			continue
		}
		if n.silenceLocked(id, now) >= n.cfg.DeadAfter {
			dead = append(dead, id)
		}
	}
	for id := range n.reap.seen {
		if !in[id] {
			delete(n.reap.seen, id)
		}
	}
	return dead
}

// Leave asks the leader to remove this node at once, for a non-voter that
// stops for good (a sidecar whose pod is going away); a voter does not
// leave (nil). Call it once this proxy has stopped serving from memory
// and writing: the leader forgets its lease and intents after it.
func (n *Node) Leave(ctx context.Context) error {
	if !n.cfg.NonVoter {
		return nil
	}
	n.leaving.Store(true)
	body, _ := json.Marshal(leaveRequest{ID: n.cfg.ID, Inc: n.inc})
	for {
		err := ErrNoLeader
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			err = n.post(ctx, string(addr), "/cluster/v1/leave", body, nil)
		}
		if err == nil {
			n.log.Info("cluster: left the cluster")
			return nil
		}
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, errForward) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: leaving: %w (%v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removeLeaving is the leader's answer to Leave: it takes the member out
// of the configuration at once, then forgets its lease and intents in
// the background once its lease has run out (it stopped serving before it
// asked, but a statement it sent the backend before stopping may still be
// running there, under one of its intents).
func (n *Node) removeLeaving(ctx context.Context, lr leaveRequest) error {
	var voter, found bool
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(lr.ID) {
			found, voter = true, s.Suffrage == raft.Voter
		}
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownNode, lr.ID)
	}
	if voter {
		return fmt.Errorf("cluster: %q is a voter: only an admin removes a voter (ADMIN CLUSTER REMOVE NODE)", lr.ID)
	}
	n.fsm.mu.RLock()
	rec := n.fsm.st.Members[lr.ID]
	stale := rec != nil && rec.Inc != lr.Inc
	n.fsm.mu.RUnlock()
	if stale {
		return fmt.Errorf("cluster: %q has restarted since it asked to leave", lr.ID)
	}
	n.rmu.Lock()
	if n.reap.leaving == nil {
		n.reap.leaving = map[string]bool{}
	}
	n.reap.leaving[lr.ID] = true
	n.rmu.Unlock()
	defer func() {
		n.rmu.Lock()
		delete(n.reap.leaving, lr.ID)
		n.rmu.Unlock()
	}()
	if err := n.raft.RemoveServer(raft.ServerID(lr.ID), 0, 5*time.Second).Error(); err != nil {
		return err
	}
	n.log.Info("cluster: member left", "id", lr.ID)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		go func() {
			select {
			case <-n.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := n.cfg.Leases.AwaitLeaseEnd(ctx, lr.ID); err != nil {
			return
		}
		if _, err := n.propose(ctx, entry{op: memberForgotten{Node: lr.ID}}); err != nil {
			n.log.Warn("cluster: could not forget a member that left", "id", lr.ID, "err", err)
		}
	}()
	return nil
}

// memberState is a member's row state in cluster_members, as this node
// sees it, and (on the leader, for a silent non-voter) how long until it
// is removed (-1: not scheduled).
func (n *Node) memberState(s raft.Server, lastContact time.Duration, leader bool, now time.Time) (string, time.Duration) {
	id := string(s.ID)
	self := id == n.cfg.ID
	n.rmu.Lock()
	defer n.rmu.Unlock()
	if n.reap.leaving[id] || (self && n.leaving.Load()) {
		return "leaving", -1
	}
	state := "live"
	switch {
	case lastContact < 0:
		state = "joining"
	case lastContact >= n.cfg.Leases.Hold():
		state = "unreachable"
	}
	if state == "live" || !leader || self || s.Suffrage == raft.Voter || n.cfg.DeadAfter <= 0 {
		return state, -1
	}
	return state, max(0, n.cfg.DeadAfter-n.silenceLocked(id, now))
}
