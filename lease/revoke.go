package lease

// The holder's half of revocation: this proxy stops serving tables when
// the leader asks, until it has applied the write's intent.

import (
	"time"
)

// namedRevoke is a revocation received before its intent was committed:
// its tables stay off memory until the intent (open or close) is applied
// here, or until a renewal started after it was received is applied.
type namedRevoke struct {
	tables []*raftTable
	at     time.Duration // when it arrived, in now() units
}

// IntentApplied is told, after the tables' states, each intent whose open
// or close was applied: a revocation waiting for it is over.
func (m *Raft) IntentApplied(name string) {
	m.revMu.Lock()
	defer m.revMu.Unlock()
	if _, ok := m.seen[name]; !ok {
		// Enough to cover the revocations in flight; older names only
		// cost a revocation that waits for the next renewal.
		const keep = 4096
		m.seen[name] = struct{}{}
		m.seenL = append(m.seenL, name)
		if len(m.seenL) > keep {
			delete(m.seen, m.seenL[0])
			m.seenL = m.seenL[1:]
		}
	}
	if r := m.revokes[name]; r != nil {
		delete(m.revokes, name)
		for _, t := range r.tables {
			t.named.Add(-1)
		}
	}
}

// Revoke stops this proxy serving tables until it has applied index (the
// intent that announced the write).
func (m *Raft) Revoke(tables []TableID, index uint64) {
	for _, id := range tables {
		raiseTo(&m.table(id).revokedUntil, index)
	}
}

// RevokeIntent stops this proxy serving tables until it has applied intent
// name, whose open this proxy's log is storing (or which the leader
// announces before it has committed it). If the intent never commits (the
// leader lost it), the revocation ends with the first renewal started
// after it last arrived: every intent committed before that renewal is
// applied by then, and one appended before it arrived and not committed
// before the renewal never will be.
func (m *Raft) RevokeIntent(tables []TableID, name string) {
	ts := make([]*raftTable, len(tables))
	for i, id := range tables {
		ts[i] = m.table(id)
	}
	m.revMu.Lock()
	defer m.revMu.Unlock()
	if _, applied := m.seen[name]; applied {
		return // its open is applied here: the intent itself stops serving
	}
	if r := m.revokes[name]; r != nil {
		// Stored again (the leader that appended the open lost it, and the
		// writer's retry reached the next one): a renewal started before
		// now may be appended before this copy, which may commit.
		r.at = m.now()
		return
	}
	for _, t := range ts {
		t.named.Add(1)
	}
	m.revokes[name] = &namedRevoke{tables: ts, at: m.now()}
}

// dropNamedRevokes ends the revocations by name that arrived before a
// renewal started at start, now applied.
func (m *Raft) dropNamedRevokes(start time.Duration) {
	m.revMu.Lock()
	defer m.revMu.Unlock()
	for name, r := range m.revokes {
		if r.at < start {
			delete(m.revokes, name)
			for _, t := range r.tables {
				t.named.Add(-1)
			}
		}
	}
}
