package cluster

// Proposing an entry: through the leader, retried while there is none;
// on the leader, appended to Raft's log.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// propose commits c through the leader, retrying while there is none,
// until ctx ends.
func (n *Node) propose(ctx context.Context, c command) (uint64, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	for {
		idx, err := n.proposeOnce(ctx, c, data)
		if err == nil || !retryable(err) {
			return idx, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-n.stop:
			return 0, errClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, errForward) || errors.Is(err, errLeaderLog)
}

var errForward = errors.New("cluster: forwarding to the leader failed")

// errLeaderLog wraps the error of the leader's own log write. Raft fails
// the batch it could not store, before any follower was sent it, and the
// leader steps down: the proposal is retried through the next leader, as
// one whose leader was deposed (every entry is idempotent).
var errLeaderLog = errors.New("cluster: the leader could not write its log")

// applyError is what a proposal's caller is told of err, the error of the
// future of this node's Apply as leader, under ctx.
func applyError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ctx.Err()
	case leaderLogFailed(err):
		return fmt.Errorf("%w: %w", errLeaderLog, err)
	}
	return err
}

// leaderLogFailed reports whether err, from the future of a leader's
// Apply, is its log store's: Raft's own answers there are the errors
// below, and a store's error is passed on as it is.
func leaderLogFailed(err error) bool {
	for _, own := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrAbortedByRestore, raft.ErrRaftShutdown,
		raft.ErrEnqueueTimeout, raft.ErrLeadershipTransferInProgress} {
		if errors.Is(err, own) {
			return false
		}
	}
	return true
}

func (n *Node) proposeOnce(ctx context.Context, c command, data []byte) (uint64, error) {
	if n.raft.State() == raft.Leader {
		return n.applyAsLeader(ctx, c, data)
	}
	changed := n.leaderChanged()
	addr, _ := n.raft.LeaderWithID()
	if addr == "" {
		return 0, ErrNoLeader
	}
	// A leader that stopped answering (paused, partitioned) holds the
	// request until this node notices and the cluster elects another:
	// give up on it then, and send the proposal to the successor.
	// Retrying is safe: every entry is idempotent, and an intent's open
	// that commits after its close is ignored.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			cancel()
		case <-fctx.Done():
		}
	}()
	var out struct {
		Index uint64 `json:"index"`
	}
	if err := n.post(fctx, string(addr), "/cluster/v1/propose", data, &out); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// applyAsLeader appends c and, for an intent, revokes it.
func (n *Node) applyAsLeader(ctx context.Context, c command, data []byte) (_ uint64, err error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if c.Op == opRenew && !n.isMember(c.Node) {
		return 0, fmt.Errorf("%w: %q", ErrNotMember, c.Node)
	}
	if c.Op == opBump && n.fsm.allWritten(c.Tables) {
		n.deferred.Add(1)
		n.markDirty(c.Tables)
		return 0, nil
	}
	// Deferred bumps ride on this entry: it is appended after they were
	// asked for, which is all a bump needs.
	if extra := n.takeDirty(); len(extra) > 0 {
		defer func() {
			if err != nil {
				n.markDirty(extra) // the flusher tries again
			}
		}()
		c.Bumps = append(c.Bumps, extra...)
		if data, err = json.Marshal(c); err != nil {
			return 0, err
		}
	}
	f := n.raft.Apply(data, timeout)
	var early map[string]chan error
	if c.Op == opOpen {
		// The entry is queued: any renewal queued from now on commits
		// after it. Ask the proxies that hold leases now to stop serving
		// while it commits, instead of after.
		early = n.revokeEarly(ctx, c.Tables, c.Intent, writer{c.Node, c.Inc})
	}
	if err := f.Error(); err != nil {
		return 0, applyError(ctx, err)
	}
	idx := f.Index()
	if c.Op == opOpen {
		if err := n.revoke(ctx, c.Tables, idx, writer{c.Node, c.Inc}, early); err != nil {
			return 0, err
		}
	}
	return idx, nil
}
