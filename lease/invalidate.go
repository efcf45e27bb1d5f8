package lease

// Changes that did not go through this proxy: version bumps for what the
// binary log shows, and the leader's word on whether it follows that log.

import (
	"context"
)

// FollowBinlog reports whether this proxy should follow the backend's
// binary log: only the leader does, so each bypassing write is proposed
// once.
func (m *Raft) FollowBinlog() bool { return m.log != nil && m.log.IsLeader() }

// SetBinlogWatched is told by the leader's binary-log follower whether it
// follows the log and has caught up; the others ask BinlogWatched before
// answering from memory, since writes that bypass the proxies reach them
// only through the versions that follower bumps.
// A bump this proxy could not commit (see Invalidate) is a change the
// others have not been told of: until it commits, it says it is not.
func (m *Raft) SetBinlogWatched(ok bool) {
	m.binlogMu.Lock()
	defer m.binlogMu.Unlock()
	m.binlogWant = ok
	m.tellBinlogLocked()
}

func (m *Raft) tellBinlog() {
	m.binlogMu.Lock()
	defer m.binlogMu.Unlock()
	m.tellBinlogLocked()
}

func (m *Raft) tellBinlogLocked() {
	if m.log == nil {
		return
	}
	m.pendMu.Lock()
	pending := len(m.pending)
	m.pendMu.Unlock()
	m.log.SetBinlogWatched(m.binlogWant && pending == 0)
}

// BinlogWatched reports whether the cluster's leader has said it follows
// the binary log and has caught up, in the current term.
func (m *Raft) BinlogWatched() bool { return m.log != nil && m.log.BinlogWatched() }

// Invalidate implements Manager. A bump that cannot be committed now keeps
// this proxy off its copy until a later bump is applied, and is retried
// with every renewal.
func (m *Raft) Invalidate(id TableID) Version {
	t := m.table(id)
	want := t.version.Load() + 1
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease)
	err := m.log.Bump(ctx, []TableID{id})
	cancel()
	if err != nil {
		raiseTo(&t.dirtyBelow, want)
		m.pendMu.Lock()
		m.pending[id] = true
		m.pendMu.Unlock()
		m.tellBinlog()
		m.lg.Warn("lease: version bump failed; this proxy stops serving the table until one commits", "table", id.String(), "err", err)
	}
	return Version(want)
}

func (m *Raft) retryPending() {
	m.pendMu.Lock()
	var ids []TableID
	for id := range m.pending {
		ids = append(ids, id)
	}
	m.pendMu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease/2)
	defer cancel()
	if err := m.log.Bump(ctx, ids); err != nil {
		return
	}
	m.pendMu.Lock()
	for _, id := range ids {
		delete(m.pending, id)
	}
	m.pendMu.Unlock()
	m.tellBinlog()
}
