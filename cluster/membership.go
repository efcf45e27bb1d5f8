package cluster

// Membership: joining (idempotently), adding and removing members, and
// the members as this node knows them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotMember is the leader's answer to a renewal from a node that is not
// in the configuration.
var ErrNotMember = errors.New("cluster: not a member")

func (n *Node) isMember(id string) bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}

// startJoin starts a join loop unless one runs already.
func (n *Node) startJoin() {
	if !n.joining.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go n.joinLoop()
}

// joinLoop asks the cluster to add this node until it has: through the
// leader this node last knew of (a removed non-voter joining again), or
// else the member at cfg.Join.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	defer n.joining.Store(false)
	body, _ := json.Marshal(joinRequest{ID: n.cfg.ID, Addr: n.advertise, Voter: !n.cfg.NonVoter})
	backoff := 100 * time.Millisecond
	for {
		via := n.cfg.Join
		if addr, id := n.raft.LeaderWithID(); addr != "" && id != raft.ServerID(n.cfg.ID) {
			via = string(addr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.post(ctx, via, "/cluster/v1/join", body, nil)
		cancel()
		if err == nil {
			n.log.Info("cluster: joined", "via", via)
			return
		}
		n.log.Warn("cluster: join failed; retrying", "via", via, "err", err, "retry_in", backoff)
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// notAMember is told that the leader refused this node's renewal because
// it is not in the configuration: it was removed while alive (its
// renewals stopped reaching the leader for longer than DeadAfter, or an
// admin removed it). A non-voter joins again, as a pod that lost its
// network for a while should; a voter stays out until an admin adds it
// back, since a voter is never added or removed without one.
func (n *Node) notAMember() {
	if !n.cfg.NonVoter || n.leaving.Load() || n.cfg.Join == "" || n.cfg.Join == n.cfg.RaftListen {
		return
	}
	select {
	case <-n.stop:
		return
	default:
	}
	n.log.Warn("cluster: this non-voter was removed from the cluster, or has heard from no leader for a while; joining again")
	n.startJoin()
}

// addMember adds (or, with a new address or role, re-adds) a member; on a
// follower it forwards the request to the leader. Adding a member that is
// already there as asked changes nothing.
func (n *Node) addMember(ctx context.Context, jr joinRequest) error {
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			return ErrNoLeader
		}
		body, _ := json.Marshal(jr)
		return n.post(ctx, string(addr), "/cluster/v1/join", body, nil)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID != raft.ServerID(jr.ID) {
			continue
		}
		if string(s.Address) == jr.Addr && (s.Suffrage == raft.Voter) == jr.Voter {
			return nil
		}
		if s.ID == raft.ServerID(n.cfg.ID) {
			return errors.New("cluster: a node cannot change its own address or role while it leads")
		}
		if err := n.raft.RemoveServer(s.ID, 0, 5*time.Second).Error(); err != nil {
			return err
		}
	}
	var f raft.IndexFuture
	if jr.Voter {
		f = n.raft.AddVoter(raft.ServerID(jr.ID), raft.ServerAddress(jr.Addr), 0, 5*time.Second)
	} else {
		f = n.raft.AddNonvoter(raft.ServerID(jr.ID), raft.ServerAddress(jr.Addr), 0, 5*time.Second)
	}
	if err := f.Error(); err != nil {
		return err
	}
	n.sawMember(jr.ID)
	n.log.Info("cluster: member added", "id", jr.ID, "addr", jr.Addr, "voter", jr.Voter)
	return nil
}

// ErrUnknownNode is RemoveNode's error for an id that is not a member.
var ErrUnknownNode = errors.New("cluster: no such node")

// RemoveNode removes a (dead) member and closes the write intents it left
// open. On a follower it forwards to the leader.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			return ErrNoLeader
		}
		body, _ := json.Marshal(joinRequest{ID: id})
		err := n.post(ctx, string(addr), "/cluster/v1/remove", body, nil)
		if err != nil && strings.Contains(err.Error(), ErrUnknownNode.Error()) {
			return ErrUnknownNode
		}
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	found := false
	for _, s := range cf.Configuration().Servers {
		found = found || s.ID == raft.ServerID(id)
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 5*time.Second).Error(); err != nil {
		return err
	}
	// Closing its intents lets the others serve their tables again. If the
	// node is still running (it was not dead after all) it may be writing
	// under them: wait until it has lost its lease, which it cannot renew
	// any more, and with it the right to write under an intent it holds.
	if err := n.cfg.Leases.AwaitLeaseEnd(ctx, id); err != nil {
		return err
	}
	_, err := n.propose(ctx, entry{op: memberForgotten{Node: id}})
	n.log.Info("cluster: member removed", "id", id, "err", err)
	return err
}

// Member is one row of tableproxy.cluster_members.
type Member struct {
	ID, Address  string
	Voter        bool
	Leader       bool
	LastContact  time.Duration // since this node applied the member's last lease renewal; -1 if never
	AppliedIndex uint64        // as the member reported it in that renewal (live for this node)
	Self         bool
	// State is live (its lease may be valid by this node's clock),
	// unreachable (it ran out: the member is silent since LastContact),
	// joining (no renewal applied yet) or leaving (removing itself).
	State string
	// RemoveIn is, on the leader, how long until it removes this silent
	// non-voter; -1 when none is due (a voter, a live member, a follower's
	// view).
	RemoveIn time.Duration
}

// Members lists the configuration, as this node knows it.
func (n *Node) Members() ([]Member, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	_, leader := n.raft.LeaderWithID()
	leading := n.raft.State() == raft.Leader
	now := time.Now()
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	var out []Member
	for _, s := range cf.Configuration().Servers {
		m := Member{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter,
			Leader: s.ID == leader, LastContact: -1, Self: s.ID == raft.ServerID(n.cfg.ID)}
		if rec := n.fsm.st.Members[m.ID]; rec != nil {
			if since, ok := n.cfg.Leases.SinceRenewal(m.ID); ok {
				m.LastContact = since
			}
			m.AppliedIndex = rec.Applied
		}
		if m.Self {
			m.AppliedIndex = n.raft.AppliedIndex()
		}
		m.State, m.RemoveIn = n.memberState(s, m.LastContact, leading, now)
		out = append(out, m)
	}
	return out, nil
}
