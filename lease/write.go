package lease

// A write: this proxy's write intents in the log, which its writes to the
// same tables share, and their closes.

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// shared is one write intent in the log that this proxy's writes to its
// tables share. A write to tables that already have one joins it (no Raft
// round trip, no revocation: every other proxy already stopped serving
// them when it opened); it closes once no write has used it for Linger.
// The other proxies see one longer write: their copies stay unservable
// from its open until its close applies, and the close bumps the versions
// once, after every write that used it has ended.
type shared struct {
	name  string
	ids   []TableID
	ready chan struct{} // closed once the open committed or failed
	err   error         // the open's error; written before ready closes

	refs   int    // writes between BeginWrite and End that use it
	gen    uint64 // counts its idle periods: a linger timer of an older one does nothing
	opened bool   // the open committed
	closed bool   // no write may join it any more
}

// BeginWrite implements Manager: it stops this proxy serving ids at once,
// then joins the intent this proxy already holds on them or opens one
// through the log, which returns once every other proxy has stopped too.
func (m *Raft) BeginWrite(ctx context.Context, ids ...TableID) (*Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := make([]*raftTable, len(ids))
	for i, id := range ids {
		ts[i] = m.table(id)
		ts[i].local.Add(1)
	}
	uses, mine := m.join(ts)
	var err error
	if mine != nil {
		octx, cancel := context.WithTimeout(ctx, m.cfg.OpenTimeout)
		var index uint64
		index, err = m.log.OpenIntent(octx, mine.name, mine.ids)
		cancel()
		if err == nil {
			// The leader asks every other proxy to stop serving, not this
			// one: its writes keep its copies off (local) until they end,
			// and this keeps them off after that until the open is
			// applied here, from where the intent itself does. Sparing
			// the leader a revocation round trip to the writer while the
			// open commits is worth a fraction of a millisecond on a
			// lone write.
			m.Revoke(mine.ids, index)
		}
		m.wmu.Lock()
		mine.err, mine.opened = err, err == nil
		if err != nil {
			// It may have committed after all: close it (a close of an
			// intent that never opened changes nothing).
			mine.closed = true
			m.forgetLocked(mine)
			m.closeLaterLocked(mine.name)
		}
		m.wmu.Unlock()
		close(mine.ready)
	}
	for _, s := range uses {
		if s == mine {
			continue
		}
		select {
		case <-s.ready:
			if s.err != nil && err == nil {
				err = s.err
			}
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	}
	if err != nil {
		m.release(ts, uses)
		return nil, fmt.Errorf("lease: write intent on %v: %w", ids, err)
	}
	return NewIntent(ids, func() map[TableID]Version {
		out := make(map[TableID]Version, len(ts))
		for _, t := range ts {
			out[t.id] = t.Version() + 1
		}
		// The intent stays open in the log until its close commits, so no
		// proxy serves these tables meanwhile, this one included: the
		// write's answer need not wait for it.
		m.release(ts, uses)
		return out
	}), nil
}

// join finds, for each table, the intent of this proxy that a new write
// may share, and takes a reference on each. The tables left over get a new
// intent (mine), registered before it opens so that concurrent writers
// wait for its open instead of opening their own.
//
// An intent that has opened is joined only while this proxy's lease is
// valid: the log keeps it open until this proxy closes it, unless this
// proxy is removed from the cluster, and a removed proxy loses its lease
// before the leader closes the intents it left (see AwaitLeaseEnd).
func (m *Raft) join(ts []*raftTable) (uses []*shared, mine *shared) {
	valid := m.LeaseValid()
	m.wmu.Lock()
	defer m.wmu.Unlock()
	var missing []TableID
	for _, t := range ts {
		s := m.active[t.id]
		if s == nil || s.closed || (s.opened && !valid) {
			missing = append(missing, t.id)
			continue
		}
		if !slices.Contains(uses, s) {
			s.refs++
			uses = append(uses, s)
		}
	}
	if len(missing) == 0 {
		return uses, nil
	}
	mine = &shared{name: fmt.Sprintf("%s/%x/%d", m.log.ID(), m.log.Incarnation(), m.seq.Add(1)),
		ids: missing, ready: make(chan struct{}), refs: 1}
	for _, id := range missing {
		m.active[id] = mine
	}
	return append(uses, mine), mine
}

// release ends one write's use of its intents; an intent no write uses
// closes after Linger unless a write joins it first.
func (m *Raft) release(ts []*raftTable, uses []*shared) {
	for _, t := range ts {
		t.local.Add(-1)
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for _, s := range uses {
		s.refs--
		if s.refs > 0 || s.closed {
			continue
		}
		if m.cfg.Linger < 0 {
			s.closed = true
			m.forgetLocked(s)
			m.closeLaterLocked(s.name)
			continue
		}
		s.gen++
		gen := s.gen
		time.AfterFunc(m.cfg.Linger, func() { m.idle(s, gen) })
	}
}

// idle closes s if no write has used it since its idle period gen began.
func (m *Raft) idle(s *shared, gen uint64) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if s.gen != gen || s.refs > 0 || s.closed {
		return
	}
	s.closed = true
	m.forgetLocked(s)
	m.closeLaterLocked(s.name)
}

// forgetLocked unregisters s from the tables it is the intent of.
func (m *Raft) forgetLocked(s *shared) {
	for _, id := range s.ids {
		if m.active[id] == s {
			delete(m.active, id)
		}
	}
}

// closeLaterLocked starts committing the close of intent name in the
// background. The caller holds wmu. After Close has begun, nothing is
// started: a restart of this node closes its intents.
func (m *Raft) closeLaterLocked(name string) {
	if m.closing {
		return
	}
	m.closers.Add(1)
	go m.closeLoop(name)
}

// closeLoop commits the close of intent name, retrying until it has.
func (m *Raft) closeLoop(name string) {
	defer m.closers.Done()
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
		err := m.log.CloseIntent(ctx, name)
		cancel()
		if err == nil {
			return
		}
		m.lg.Warn("lease: closing a write intent failed; retrying", "intent", name, "err", err)
		select {
		case <-m.stop:
			return // a restart of this node closes its intents
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}
