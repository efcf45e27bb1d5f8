package cache

// Learning that a table is cached. Until this proxy has added a newly
// cached table, it takes it for an uncached one: its sessions' writes to
// it go to the backend without an intent. The cluster serves the table
// from memory nowhere until every proxy has said it has learned of it
// (cluster's ready.go); so before saying so, this proxy makes sure no
// write it let through that way can still be answered unseen: every
// session that may have written the table (one in a transaction, or with
// a statement under way, begun before the table was added) gets an intent
// on it, held until that statement or transaction ends, exactly as if it
// had written the table knowing it cached. A write answered before that
// was in the backend before the cluster's ready entry, and every copy is
// loaded after that entry (it bumps the version).

import (
	"context"
	"slices"
	"time"

	"tableproxy/lease"
)

// coverRetry is the pause between attempts to open a covering intent that
// the cluster could not open (an election, a lost quorum).
const coverRetry = 100 * time.Millisecond

// cover opens an intent on ids for each session that may have written
// them unseen, and returns once each is open, or the session's statement
// or transaction has ended (its write, if any, was answered before).
func (p *Plugin) cover(ids []lease.TableID) {
	if p.txs == nil || len(ids) == 0 {
		return
	}
	mark := p.txs.Mark() // after the tables were added: later statements see them
	held := map[uint32]*lease.Intent{}
	for _, conn := range p.txs.OpenBefore(mark) {
		if in := p.coverSession(conn, ids, mark); in != nil {
			held[conn] = in
		}
	}
	// A session ends its writes (endWrites) after the proxy has recorded
	// that its transaction ended: one that is not open now ended its
	// writes before its intent was held, or will end it.
	still := map[uint32]bool{}
	for _, conn := range p.txs.OpenBefore(mark) {
		still[conn] = true
	}
	for conn, in := range held {
		if !still[conn] {
			p.dropHeld(conn, in)
		}
	}
}

// coverSession opens an intent on ids and holds it for session conn until
// its current statement or transaction ends; nil if it ended before the
// cluster could open one.
func (p *Plugin) coverSession(conn uint32, ids []lease.TableID, mark uint64) *lease.Intent {
	for {
		in, err := p.leases.BeginWrite(context.Background(), ids...)
		if err == nil {
			p.heldMu.Lock()
			p.held[conn] = append(p.held[conn], heldWrite{in: in})
			p.heldMu.Unlock()
			return in
		}
		p.log.Warn("cache: could not open an intent for a session that may have written a newly cached table; retrying",
			"conn", conn, "tables", ids, "err", err)
		select {
		case <-p.stop:
			return nil
		case <-time.After(coverRetry):
		}
		if !slices.Contains(p.txs.OpenBefore(mark), conn) {
			return nil
		}
	}
}

// dropHeld ends in, held for session conn, unless the session ended it.
func (p *Plugin) dropHeld(conn uint32, in *lease.Intent) {
	p.heldMu.Lock()
	hws := p.held[conn]
	found := false
	for i, hw := range hws {
		if hw.in == in {
			p.held[conn] = append(hws[:i:i], hws[i+1:]...)
			found = true
			break
		}
	}
	if len(p.held[conn]) == 0 {
		delete(p.held, conn)
	}
	p.heldMu.Unlock()
	if found {
		in.End()
	}
}
