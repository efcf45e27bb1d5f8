package cluster

// The leader appends lease renewals in batches. Every member renews every
// quarter lease, each on its own timer, so with tens of sidecars renewals
// arrive one by one, and each one alone was a round of AppendEntries to
// every follower (and an fsync on each): the leader's idle CPU grew with
// the square of the fleet (three voters and 30 sidecars: a quarter of a
// core, three quarters of it replicating renewals). Held for up to
// renewWindow and appended together, they go out in one round. A renewal
// that waits costs its proxy nothing but that wait off its lease, which
// is counted from before the renewal was sent.

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// renewWindow is the longest a renewal waits for others to go with it:
// with renewals every 500 ms, at most a fifth of the renewal period.
const renewWindow = 100 * time.Millisecond

// renewBatch is the renewals waiting to be appended, guarded by mu.
type renewBatch struct {
	mu      sync.Mutex
	pending []*queuedRenewal
}

type queuedRenewal struct {
	data []byte
	done chan renewResult
}

type renewResult struct {
	index uint64
	err   error
}

// appendRenewal appends a renewal, encoded as data, with the others that
// arrive within renewWindow of the first, and returns its index once it
// has committed.
func (n *Node) appendRenewal(ctx context.Context, data []byte) (uint64, error) {
	q := &queuedRenewal{data: data, done: make(chan renewResult, 1)}
	n.renewals.mu.Lock()
	n.renewals.pending = append(n.renewals.pending, q)
	if len(n.renewals.pending) == 1 {
		time.AfterFunc(renewWindow, n.flushRenewals)
	}
	n.renewals.mu.Unlock()
	select {
	case r := <-q.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.stop:
		return 0, errClosed
	}
}

// flushRenewals appends the waiting renewals at once: Raft takes them in
// one batch (BatchApplyCh), one fsync and one AppendEntries per follower.
func (n *Node) flushRenewals() {
	n.renewals.mu.Lock()
	qs := n.renewals.pending
	n.renewals.pending = nil
	n.renewals.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fs := make([]raft.ApplyFuture, len(qs))
	for i, q := range qs {
		fs[i] = n.raft.Apply(q.data, 5*time.Second)
	}
	for i, f := range fs {
		if err := f.Error(); err != nil {
			qs[i].done <- renewResult{err: applyError(ctx, err)}
			continue
		}
		qs[i].done <- renewResult{index: f.Index()}
	}
}
