package cache

import (
	"context"
	"sync"
	"time"

	"tableproxy/lease"
)

// A write through a view changes the view's base tables, and a write to a
// table with triggers may change whatever the triggers write; the
// statement names neither. So a write to a view, or to a table with
// triggers, is a write of every cached table. Which tables are views or
// have triggers is looked up on a table's first write, as the admin who
// cached the tables (triggers are visible only to who may change them),
// and remembered until the next DDL, through the proxy or in the binary
// log. (A trigger created by another application between the lookup and
// a write is seen in the binary log, as any write that bypasses the proxy.)

// indirectWrites remembers, per table written, whether its writes may
// write other tables.
type indirectWrites struct {
	mu    sync.Mutex
	known map[lease.TableID]bool
}

// writesElsewhere reports whether a write of any of ids may write tables
// the statement does not name.
func (p *Plugin) writesElsewhere(ids []lease.TableID) bool {
	for _, id := range ids {
		p.indirect.mu.Lock()
		elsewhere, known := p.indirect.known[id]
		p.indirect.mu.Unlock()
		if !known {
			var ok bool
			if elsewhere, ok = p.lookUpIndirect(id); ok {
				p.indirect.mu.Lock()
				if p.indirect.known == nil {
					p.indirect.known = map[lease.TableID]bool{}
				}
				p.indirect.known[id] = elsewhere
				p.indirect.mu.Unlock()
			}
		}
		if elsewhere {
			return true
		}
	}
	return false
}

// forgetIndirect drops what was looked up: a DDL statement may have
// created or dropped a view or a trigger.
func (p *Plugin) forgetIndirect() {
	p.indirect.mu.Lock()
	clear(p.indirect.known)
	p.indirect.mu.Unlock()
}

// lookUpIndirect asks the backend whether id is a view or has triggers.
// When it cannot tell (ok false), the answer is yes.
func (p *Plugin) lookUpIndirect(id lease.TableID) (elsewhere, ok bool) {
	w := p.watch.Load() // (its user is the admin the binary log is read as)
	if w == nil {
		return true, false
	}
	user := w.user
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := p.backend.Connect(ctx, user, "")
	if err != nil {
		return true, false
	}
	defer conn.Close()
	r, err := conn.Execute(`SELECT (SELECT COUNT(*) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND TABLE_TYPE = 'VIEW') +
		(SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?)`,
		id.Schema, id.Table, id.Schema, id.Table)
	if err != nil {
		return true, false
	}
	defer r.Close()
	n, err := r.GetInt(0, 0)
	if err != nil {
		return true, false
	}
	return n > 0, true
}
