package cluster

// Proposing an entry: through the leader, retried while there is none;
// on the leader, appended to Raft's log.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"tableproxy/lease"
)

// propose commits e through the leader, retrying while there is none,
// until ctx ends.
func (n *Node) propose(ctx context.Context, e entry) (uint64, error) {
	data, err := e.marshal()
	if err != nil {
		return 0, err
	}
	for {
		idx, err := n.proposeOnce(ctx, e, data)
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

// proposeOnce commits e, encoded as data, as the leader or through it.
func (n *Node) proposeOnce(ctx context.Context, e entry, data []byte) (uint64, error) {
	if n.raft.State() == raft.Leader {
		return n.applyAsLeader(ctx, e, data)
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

// applyAsLeader appends e, encoded as data, and for an intent's open has
// the lease protocol revoke it while it commits.
func (n *Node) applyAsLeader(ctx context.Context, e entry, data []byte) (_ uint64, err error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if r, ok := e.op.(renewal); ok && !n.isMember(r.Node) {
		return 0, fmt.Errorf("%w: %q", ErrNotMember, r.Node)
	}
	if b, ok := e.op.(versionBump); ok && n.fsm.allWritten(b.Tables) {
		n.deferred.Add(1)
		n.markDirty(b.Tables)
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
		e.bumps = append(e.bumps, extra...)
		if data, err = e.marshal(); err != nil {
			return 0, err
		}
	}
	if _, ok := e.op.(renewal); ok {
		return n.appendRenewal(ctx, data)
	}
	f := n.raft.Apply(data, timeout)
	commit := func() (uint64, error) {
		if err := f.Error(); err != nil {
			return 0, applyError(ctx, err)
		}
		return f.Index(), nil
	}
	if open, ok := e.op.(intentOpen); ok {
		return n.cfg.Leases.RevokeOthers(ctx, open.Tables, open.Intent, lease.Writer{Node: open.Node, Inc: open.Inc}, commit)
	}
	return commit()
}
