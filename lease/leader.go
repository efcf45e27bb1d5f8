package lease

// The leader's half of the protocol: which proxies may be serving from
// memory, and revoking their leases for a write (Chubby's way, instead of
// waiting out every lease as TiDB does). The leader queues the write's
// intent and, while it commits, asks every other proxy whose lease may
// still be valid to stop serving the intent's tables until it has applied
// the intent (the writer stops its own copies); a proxy that does not
// answer is waited out until its lease has expired by the leader's clock.
// Only then does the writer run its statement on the backend.
//
// The leader counts a lease from the moment it applied the renewal, by
// its own clock: a time no other node shares, so it is kept here and not
// in the replicated state. It is always later than the moment the member
// started the renewal, which is what the member counts its lease from, so
// the leader's view errs on the long side.

import (
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"
)

// holder is a member that may be serving from memory, as this node sees
// it.
type holder struct {
	Holder
	renewed time.Time // when this node applied its last renewal
}

// expires is when h's lease has run out by this node's clock, lease plus
// margin after its renewal was applied.
func (m *Raft) expires(h *holder) time.Time { return h.renewed.Add(m.cfg.Hold()) }

// is reports whether h is the process w, which the leader does not ask to
// stop serving the intent it proposed: it stops its own copies until it
// has applied the open (see Log.OpenIntent), and the answer to its
// proposal is what tells it the index. Only that process is spared: a
// later incarnation of the node, which never saw the proposal, is asked
// like any other proxy.
func (h holder) is(w Writer) bool { return h.Node == w.Node && h.Inc == w.Inc }

// Renewed is told, in log order, each lease renewal applied.
func (m *Raft) Renewed(h Holder) {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	m.holders[h.Node] = &holder{Holder: h, renewed: time.Now()}
}

// Forgotten is told each member removed from the cluster.
func (m *Raft) Forgotten(node string) {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	delete(m.holders, node)
}

// HoldersRestored is told the members a snapshot restored, in place of
// every one before. When they renewed last is unknown: now, the longest
// lease.
func (m *Raft) HoldersRestored(hs []Holder) {
	now := time.Now()
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	clear(m.holders)
	for _, h := range hs {
		m.holders[h.Node] = &holder{Holder: h, renewed: now}
	}
}

// Hold is how long after this node applied a member's renewal that
// member's lease may still be valid: lease plus margin.
func (m *Raft) Hold() time.Duration { return m.cfg.Hold() }

// SinceRenewal returns how long ago this node applied node's last renewal,
// and false if it has applied none.
func (m *Raft) SinceRenewal(node string) (time.Duration, bool) {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	h := m.holders[node]
	if h == nil {
		return 0, false
	}
	return time.Since(h.renewed), true
}

// valid lists the members whose leases may still be valid at now, by
// node.
func (m *Raft) valid(now time.Time) []holder {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	var out []holder
	for _, h := range m.holders {
		if now.Before(m.expires(h)) {
			out = append(out, *h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// others lists the members whose leases may still be valid now, but this
// node, which applies an intent before its proposal returns, and the
// intent's writer.
func (m *Raft) others(w Writer) []holder {
	self := m.log.ID()
	var out []holder
	for _, h := range m.valid(time.Now()) {
		if h.Node != self && !h.is(w) {
			out = append(out, h)
		}
	}
	return out
}

// appendWait is how long the leader waits for a member to acknowledge
// the append of an intent (which stops it serving the intent's tables)
// before it asks the member directly: a healthy member has appended by the
// time the intent commits, or a few milliseconds after.
const appendWait = 50 * time.Millisecond

// RevokeOthers is the leader's part in opening intent on tables for w:
// the leader has queued the intent's entry, and commit waits for it to
// commit and returns its index. It returns the index once every other
// proxy that may be serving the tables has stopped (or its lease ran
// out).
//
// A member stops serving an intent's tables as it stores the intent's
// entry, before it acknowledges the append (see Log.AwaitAppended): Raft
// sends every member the entry anyway, in parallel and batched with
// whatever else is queued, so most members cost the write nothing more.
// Only one that has not acknowledged within appendWait after the commit
// is asked directly, and waited out if it does not answer.
func (m *Raft) RevokeOthers(ctx context.Context, tables []TableID, intent string, w Writer, commit func() (uint64, error)) (uint64, error) {
	index, err := commit()
	if err != nil {
		return 0, err
	}
	if err := m.revokeAt(ctx, tables, index, w); err != nil {
		return 0, err
	}
	return index, nil
}

// revokeAt makes every proxy whose lease may still be valid, now that the
// intent at index is applied here, stop serving tables (the writer stops
// its own): each one that has stored the log up to index has; the others
// are asked, by index, and one that does not answer is waited out until
// its lease has expired by this node's clock. This node applied the
// intent before its commit returned, so its own copies are already
// stopped.
func (m *Raft) revokeAt(ctx context.Context, tables []TableID, index uint64, w Writer) error {
	r := Revocation{Tables: tables, Index: index}
	var wg sync.WaitGroup
	for _, h := range m.others(w) {
		wg.Add(1)
		go func(h holder) {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, appendWait)
			appended := m.log.AwaitAppended(actx, h.Node, index)
			cancel()
			if appended || ctx.Err() != nil {
				return
			}
			rctx, cancel := context.WithDeadline(ctx, m.expires(&h))
			err := m.log.SendRevocation(rctx, h.Addr, r)
			cancel()
			if err != nil {
				m.awaitGone(ctx, h, r)
			}
		}(h)
	}
	wg.Wait()
	return ctx.Err()
}

// awaitGone returns once h, which did not acknowledge a revocation, no
// longer serves: it acknowledges a retry, or nothing listens at its
// address any more, or its lease has expired by this node's clock. A
// proxy keeps its cluster address open for as long as it may serve from
// memory (Raft stops serving in Close, before the cluster node closes its
// listener, which never closes by itself), so a refused connection means
// its process is gone: a killed leader's successor need not wait out its
// lease. A paused or unreachable proxy still accepts connections in its
// kernel, or times out, and is waited out.
func (m *Raft) awaitGone(ctx context.Context, h holder, r Revocation) {
	expires := m.expires(&h)
	for time.Now().Before(expires) {
		refused, connected := Probe(h.Addr, min(time.Until(expires), 250*time.Millisecond))
		if refused {
			return
		}
		if connected {
			rctx, cancel := context.WithDeadline(ctx, expires)
			err := m.log.SendRevocation(rctx, h.Addr, r)
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		}
	}
}

// Probe dials a proxy's cluster address within timeout. refused: nothing
// listens there, so the proxy's process has ended (a proxy keeps that
// address open for as long as it may serve or write). connected: something
// accepted, which a paused process's kernel does too; neither: no answer
// in time (paused, unreachable).
func Probe(addr string, timeout time.Duration) (refused, connected bool) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if c != nil {
		c.Close()
	}
	return errors.Is(err, syscall.ECONNREFUSED), err == nil
}

// AwaitLeaseEnd returns once node's lease, as this node has applied its
// renewals, has run out, or when ctx ends. The leader closes a removed
// member's intents only then: if it is still running (it was not dead
// after all) it may be writing under them, and it cannot renew any more.
func (m *Raft) AwaitLeaseEnd(ctx context.Context, node string) error {
	for _, h := range m.valid(time.Now()) {
		if h.Node != node {
			continue
		}
		t := time.NewTimer(time.Until(m.expires(&h)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return nil
}
