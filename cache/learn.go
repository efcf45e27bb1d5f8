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
	for _, conn := range p.txs.OpenBefore(mark) {
		p.coverSession(conn, ids, mark)
	}
}

// coverSession holds an intent on ids for session conn until its current
// statement or transaction ends.
func (p *Plugin) coverSession(conn uint32, ids []lease.TableID, mark uint64) {
	for {
		if !p.openBefore(conn, mark) {
			return
		}
		in, err := p.leases.BeginWrite(context.Background(), ids...)
		if err != nil {
			p.log.Warn("cache: could not open an intent for a session that may have written a newly cached table; retrying",
				"conn", conn, "tables", ids, "err", err)
			select {
			case <-p.stop:
				return
			case <-time.After(coverRetry):
			}
			continue
		}
		hw := heldWrite{in: in}
		p.heldMu.Lock()
		p.held[conn] = append(p.held[conn], hw)
		p.heldMu.Unlock()
		// The session ends its writes (endWrites) after the proxy has
		// recorded that its transaction ended: if it is not open now, it
		// ended its writes before this one was held, or will end it.
		if !p.openBefore(conn, mark) {
			p.dropHeld(conn, in)
		}
		return
	}
}

// openBefore reports whether session conn is still in the transaction or
// statement it was in at mark.
func (p *Plugin) openBefore(conn uint32, mark uint64) bool {
	for _, c := range p.txs.OpenBefore(mark) {
		if c == conn {
			return true
		}
	}
	return false
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
