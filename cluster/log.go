package cluster

// The operations other packages commit through the log: the lease
// protocol's (lease.Log) and the catalog of cached tables.

import (
	"context"
	"errors"
	"time"

	"tableproxy/lease"
)

// Renew commits a renewal of this proxy's lease (with its applied index,
// for cluster_members) and returns its index. The leader refuses renewals
// from nodes outside the configuration: a removed node no longer receives
// the log, so it must not get a lease.
//
// A refusal is ErrNotMember, which the leader answers at once instead of
// leaving the follower to retry until its context ends; a non-voter told
// so joins again (notAMember).
//
// A removed non-voter stops hearing from the leader, and may lose track of
// it before a renewal of its own is refused: one that has known no leader
// for leaderlessRejoin asks to be added again through its join address,
// which changes nothing if it is still a member.
func (n *Node) Renew(ctx context.Context) (uint64, error) {
	idx, err := n.propose(ctx, entry{op: renewal{Node: n.cfg.ID, Inc: n.inc, Addr: n.advertise, Applied: n.raft.AppliedIndex(), Learned: n.learnedIndex()}})
	switch {
	case errors.Is(err, ErrNotMember):
		n.notAMember()
	case err != nil && n.leaderlessFor() >= leaderlessRejoin:
		n.notAMember()
	}
	return idx, err
}

// leaderlessRejoin is how long a non-voter knows no leader before it asks
// to join again (an election takes well under a second).
const leaderlessRejoin = 2 * time.Second

// leaderlessFor is how long this node has known no leader (0 if it knows
// one now).
func (n *Node) leaderlessFor() time.Duration {
	if addr, _ := n.raft.LeaderWithID(); addr != "" {
		n.leaderless.Store(0)
		return 0
	}
	now := time.Now().UnixNano()
	n.leaderless.CompareAndSwap(0, now)
	return time.Duration(now - n.leaderless.Load())
}

// OpenIntent commits intent id on tables and returns its index once every
// other proxy whose lease may be valid has stopped serving them (or its
// lease ran out); this one is not asked (see lease.Log). Retrying with the
// same id is safe.
func (n *Node) OpenIntent(ctx context.Context, id string, tables []lease.TableID) (uint64, error) {
	return n.propose(ctx, entry{op: intentOpen{Node: n.cfg.ID, Inc: n.inc, Intent: id, Tables: tables}})
}

// CloseIntent commits the end of intent id: its tables' versions go up.
func (n *Node) CloseIntent(ctx context.Context, id string) error {
	_, err := n.propose(ctx, entry{op: intentClose{Intent: id}})
	return err
}

// Bump makes tables' versions go up in an entry that the leader appends
// after this call, so every proxy loads them again after applying it.
//
// The leader defers a bump of tables that all have a write intent open:
// no proxy serves them until the intent closes, and the deferred bump
// rides on the next entry the leader appends (a renewal, an intent, the
// close itself), or goes alone once their intents are closed. The binary
// log reports every write made through the proxies too, and would
// otherwise cost a Raft commit (an fsync on every voter) per write.
func (n *Node) Bump(ctx context.Context, tables []lease.TableID) error {
	_, err := n.propose(ctx, entry{op: versionBump{Tables: tables}})
	return err
}

// Catalog lists the cached tables, as this node has applied them.
func (n *Node) Catalog() []CatalogEntry { return n.fsm.catalog() }

// CacheTable commits a table into the catalog, pending until every member
// has learned of it (ready.go).
func (n *Node) CacheTable(ctx context.Context, e CatalogEntry) error {
	e.Pending = true
	_, err := n.propose(ctx, entry{op: tableCached{Entry: e}})
	return err
}

// NoCacheTable commits a table's removal from the catalog.
func (n *Node) NoCacheTable(ctx context.Context, id lease.TableID) error {
	_, err := n.propose(ctx, entry{op: tableUncached{Tables: []lease.TableID{id}}})
	return err
}
