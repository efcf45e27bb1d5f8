package cluster

// A newly cached table is served from memory only once every member knows
// it is cached. A proxy that has not yet applied the entry that cached it
// takes it for an uncached table and writes it without an intent: the
// others would keep serving their copies until the binary log's bump
// reached them, after the writer had answered its client. So the entry
// commits Pending; each proxy says, in its renewals, the newest catalog
// entry it has learned of (its cache has added the table, so that its
// writes open intents, and has opened intents for the sessions that may
// have written the table before: see cache.Plugin.cover); and the leader
// marks the entry ready once every member of the configuration has said
// so, or is gone. The ready entry bumps the table's version, so a copy is
// served only if its load began after it, when every write answered
// without an intent is in the backend's snapshot.

import (
	"context"
	"slices"
	"time"

	"tableproxy/lease"
)

// readyEvery is how often the leader looks for pending entries whose
// members have all learned of them; the members say so in renewals, every
// quarter lease.
const readyEvery = 50 * time.Millisecond

// SetLearned says that this proxy has learned of every catalog entry up to
// index (see the file comment). Until it is first called, renewals say
// this node has learned everything it has applied: a node that runs no
// cache writes nothing on its account.
//
// It also sends a renewal at once, so the leader need not wait for the
// next one (a renewal out of turn only makes the leader count this
// proxy's lease from later than the proxy does, the safe side).
func (n *Node) SetLearned(index uint64) {
	n.tracksLearned.Store(true)
	for {
		cur := n.learned.Load()
		if index <= cur {
			return
		}
		if n.learned.CompareAndSwap(cur, index) {
			break
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := n.Renew(ctx); err != nil {
			n.log.Debug("cluster: a renewal saying what this proxy learned failed; the next one says it", "err", err)
		}
	}()
}

// TrackLearned says that this node's cache will call SetLearned: from now
// on renewals say only what it has.
func (n *Node) TrackLearned() { n.tracksLearned.Store(true) }

// learnedIndex is what this node's renewals say it has learned.
func (n *Node) learnedIndex() uint64 {
	if !n.tracksLearned.Load() {
		return n.raft.AppliedIndex()
	}
	return n.learned.Load()
}

// markReady marks the pending catalog entries that every member has
// learned of ready; it runs while this node leads (see Open). Each member
// is judged once per run, however many entries are pending: a member
// whose lease ran out is probed, up to 250 ms for one that is paused.
func (n *Node) markReady(bool) {
	pending := n.pendingEntries()
	if len(pending) == 0 {
		return
	}
	newest := uint64(0)
	for _, e := range pending {
		newest = max(newest, e.Index)
	}
	learned := n.membersLearned(newest)
	for _, e := range pending {
		if waiting := learned.waiting(e.Index); len(waiting) > 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := n.propose(ctx, entry{op: tableCached{Entry: e, Ready: e.Index}, bumps: []lease.TableID{e.ID()}})
		cancel()
		if err != nil {
			n.log.Warn("cluster: could not mark a cached table ready", "table", e.ID().String(), "err", err)
			continue
		}
		n.log.Info("cluster: every member knows the table is cached; it may be served", "table", e.ID().String())
	}
}

// pendingEntries lists the catalog entries not servable yet.
func (n *Node) pendingEntries() []CatalogEntry {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	var out []CatalogEntry
	for _, e := range n.fsm.st.Catalog {
		if e.Pending {
			out = append(out, e)
		}
	}
	return out
}

// learnedBy is, for each member of the configuration that is not gone,
// the newest catalog entry it has said it learned of.
type learnedBy map[string]uint64

// waiting lists the members that have not said they know of the catalog
// entry cached at index: what a pending table waits for.
func (l learnedBy) waiting(index uint64) []string {
	var out []string
	for id, learned := range l {
		if learned < index {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// membersLearned reads what each member of the configuration has learned,
// leaving out the members that are gone; a member that has learned the
// entry at newest (the newest pending one) is not probed.
func (n *Node) membersLearned(newest uint64) learnedBy {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return learnedBy{"(the configuration cannot be read)": 0}
	}
	out := learnedBy{}
	for _, s := range cf.Configuration().Servers {
		id := string(s.ID)
		addr := string(s.Address)
		n.fsm.mu.RLock()
		m := n.fsm.st.Members[id]
		learned := uint64(0)
		if m != nil {
			learned = m.Learned
			if m.Addr != "" {
				addr = m.Addr
			}
		}
		n.fsm.mu.RUnlock()
		if learned < newest && n.gone(id, addr) {
			continue
		}
		out[id] = learned
	}
	return out
}

// gone reports whether member id cannot be writing: its lease has run out
// by this node's clock (or it never renewed here) and nothing listens at
// its address any more, so its process has ended (lease.Probe). A paused or
// unreachable member is not gone: it is waited for, and removed by the
// reaper if it is a non-voter that stays silent.
func (n *Node) gone(id, addr string) bool {
	if id == n.cfg.ID {
		return false
	}
	if since, ok := n.cfg.Leases.SinceRenewal(id); ok && since < n.cfg.Leases.Hold() {
		return false
	}
	refused, _ := lease.Probe(addr, 250*time.Millisecond)
	return refused
}
