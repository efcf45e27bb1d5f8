package cluster

// Revocation that rides on replication. Every node's log store stops its
// proxy serving an intent's tables as it stores the intent's entry, before
// the append is acknowledged (revokingStore); the leader's transport
// records, per follower, the last index an append of this term stored
// there (ackTransport). So once a follower has acknowledged the append of
// an intent, it has stopped serving its tables, and the leader need not
// ask it: a write no longer pays a request to every proxy of the fleet,
// only the appends Raft sends anyway. Followers that do not acknowledge in
// time are asked directly and waited out as before (lease.Raft).

import (
	"bytes"
	"context"
	"sync"

	"github.com/hashicorp/raft"
)

// revokingStore is a log store that stops this proxy serving the tables
// of every intent it stores the open of, before the store returns (and so
// before the append is acknowledged). An intent stored but never applied
// (a leader deposed before it committed) is dropped by the proxy's next
// renewal, as one it was asked about directly.
type revokingStore struct {
	raft.LogStore
	leases Leases
}

// openOp is how an intent's open begins in the log (see wireEntry): a
// cheap test before decoding.
var openOp = []byte(`{"op":"open"`)

func (s revokingStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s revokingStore) StoreLogs(ls []*raft.Log) error {
	for _, l := range ls {
		if l.Type != raft.LogCommand || !bytes.HasPrefix(l.Data, openOp) {
			continue
		}
		if e, err := unmarshalEntry(l.Data); err == nil {
			if o, ok := e.op.(intentOpen); ok {
				s.leases.RevokeIntent(o.Tables, o.Intent)
			}
		}
	}
	return s.LogStore.StoreLogs(ls)
}

// IsMonotonic passes on raft-wal's answer (Raft asks its log store).
func (s revokingStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// ackTransport is the Raft transport, noting every append a follower
// acknowledged.
type ackTransport struct {
	*raft.NetworkTransport
	n *Node
}

func (t ackTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success && len(args.Entries) > 0 {
		t.n.noteAppended(string(id), args.Term, args.Entries[len(args.Entries)-1].Index)
	}
	return err
}

// appendAck is the last index a follower stored in an append of term.
type appendAck struct {
	term, index uint64
	wake        chan struct{} // closed and replaced when the ack moves
}

// acks is the appends each follower acknowledged, guarded by mu.
type acks struct {
	mu sync.Mutex
	by map[string]*appendAck
}

func (n *Node) ackOf(node string) *appendAck {
	if n.acks.by == nil {
		n.acks.by = map[string]*appendAck{}
	}
	a := n.acks.by[node]
	if a == nil {
		a = &appendAck{wake: make(chan struct{})}
		n.acks.by[node] = a
	}
	return a
}

func (n *Node) noteAppended(node string, term, index uint64) {
	n.acks.mu.Lock()
	defer n.acks.mu.Unlock()
	a := n.ackOf(node)
	if term < a.term || (term == a.term && index <= a.index) {
		return
	}
	a.term, a.index = term, index
	close(a.wake)
	a.wake = make(chan struct{})
}

// AwaitAppended reports, as soon as it knows, whether node has
// acknowledged to this leader an append of the log up to index, in the
// current term (and so stopped serving the tables of an intent at or
// before index); false when ctx ends first (lease.Log).
func (n *Node) AwaitAppended(ctx context.Context, node string, index uint64) bool {
	term := n.raft.CurrentTerm()
	for {
		n.acks.mu.Lock()
		a := n.ackOf(node)
		done, wake := a.term == term && a.index >= index, a.wake
		n.acks.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		}
	}
}
