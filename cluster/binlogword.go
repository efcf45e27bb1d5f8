package cluster

// The leader's word on the backend's binary log: whether it follows it
// and has caught up, said in the log and trusted only within its term.

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// SetBinlogWatched tells the cluster, while this node leads, whether it
// follows the backend's binary log and has caught up with it. Only the
// leader follows the log, and writes that bypass the proxies reach the
// others only through the versions it bumps: a proxy answers from memory
// only while the current term's leader has said it is watching
// (BinlogWatched), so a stalled or broken stream on the leader, or a new
// leader that has not caught up yet, stops every proxy's memory reads.
func (n *Node) SetBinlogWatched(ok bool) {
	if n.binlogWant.Swap(ok) != ok {
		select {
		case n.binlogC <- struct{}{}:
		default:
		}
	}
}

// BinlogWatched reports whether the leader has said it is watching the
// binary log, in the current term, and still leads as far as this node
// knows. Raft's current term moves before any entry of the new term is
// applied here (a candidate raises it when it starts an election, a
// follower when it hears from the new leader), so a word of an earlier
// term counts for nothing even if that term's leader got it committed
// after it died; and a node that has lost its leader (a heartbeat timeout,
// which is how a non-voter learns it) trusts nobody's word.
func (n *Node) BinlogWatched() bool {
	return binlogTrusted(n.fsm.binlog.Load(), n.raft.CurrentTerm(), *n.leaderID.Load())
}

// binlogTrusted is BinlogWatched's rule, for a word b, the current term
// and the leader's ID as this node knows them.
func binlogTrusted(b *binlogRec, term uint64, leader string) bool {
	return b != nil && b.Watching && b.Term == term && b.Node == leader
}

// binlogSaid reports whether the log already says what this node, as
// leader, wants said.
func (n *Node) binlogSaid(want bool) bool {
	b := n.fsm.binlog.Load()
	trusted := binlogTrusted(b, n.raft.CurrentTerm(), *n.leaderID.Load())
	if !want {
		return !trusted
	}
	return trusted && b.Node == n.cfg.ID && b.Inc == n.inc
}

// sayBinlog commits what this node, as leader, has to say of the binary
// log whenever it is not what the log says: when it changes, and once in
// every term it leads. It appends only as the leader (never forwards), so
// what an entry says is always its own term's leader's word.
func (n *Node) sayBinlog() {
	defer n.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.binlogC:
		case <-t.C:
		}
		want := n.binlogWant.Load()
		if n.raft.State() != raft.Leader || n.binlogSaid(want) {
			continue
		}
		e := entry{op: versionBump{}, word: &binlogWord{Node: n.cfg.ID, Inc: n.inc, Watching: want}}
		data, err := e.marshal()
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := n.applyAsLeader(ctx, e, data); err != nil {
			n.log.Debug("cluster: saying whether the binary log is watched failed; retrying", "watching", want, "err", err)
		}
		cancel()
	}
}
