// Package lease decides whether this proxy may answer reads of a cached
// table from memory, and at which version of the table.
//
// Every table has a version that only goes up: every write through a proxy
// and every change seen in the backend's binary log bumps it. A reader may
// use an in-memory copy of table T only if the copy was loaded at T's
// current version and no write to T is in flight. A writer opens an intent
// before its statement reaches the backend and closes it after the backend
// has answered; while any intent on T is open, reads of T go to the
// backend. Closing the intent bumps the version, so a copy loaded before the
// write can never be served after it: reads through the proxy see their own
// writes and every write that completed before them (linearizable on one
// proxy).
//
// Manager is the decision behind an interface; Raft (raft.go) implements
// it with revocable leases over a replicated log that package cluster
// provides through the Log interface declared here. A proxy on its own runs
// it on a cluster of one.
//
// What can go wrong: a version that went backwards, or an intent closed
// twice, would let a stale copy be served; the implementation makes both
// impossible by construction (versions are only ever incremented, an Intent
// closes once).
package lease

import (
	"context"
	"fmt"
)

// TableID names a table as the backend spells it.
type TableID struct {
	Schema string
	Table  string
}

func (t TableID) String() string { return fmt.Sprintf("`%s`.`%s`", t.Schema, t.Table) }

// Version identifies a table's contents. Zero means "never loaded".
type Version uint64

// Manager is the lease decision.
type Manager interface {
	// Table returns the lease state of t, creating it at version 1 the first
	// time. The returned handle is stable for the life of the Manager, so a
	// reader can keep it (e.g. in a cached plan) and check it per query.
	Table(t TableID) Table
	// BeginWrite opens a write intent on each of ts. When it returns, none
	// of them is servable from memory until the intent ends.
	BeginWrite(ctx context.Context, ts ...TableID) (*Intent, error)
	// Invalidate bumps t's version for a change that did not go through
	// this proxy (seen in the binary log). It returns the new version.
	Invalidate(t TableID) Version
	// Subscribe registers fn to be called (from the Manager's goroutines,
	// never under its locks) with each table whose version changed.
	Subscribe(fn func(t TableID, v Version))
}

// Table is one table's lease state, read on the hot path.
type Table interface {
	ID() TableID
	// Servable returns the version a reader must have loaded to answer from
	// memory now, and false if no in-memory answer is allowed at all.
	Servable() (Version, bool)
	// Unservable says why Servable is false ("" when it is true), for
	// operators (tableproxy.cached_tables). It reads the same state as
	// Servable, without its ordering: never decide with it.
	Unservable() string
	// Version returns the current version, servable or not.
	Version() Version
}

// ownWrites is Unservable's reason while n writes through this proxy (or
// their transactions) have not ended.
func ownWrites(n int64) string {
	return fmt.Sprintf("%d write(s) to it through this proxy not ended yet (a transaction's, until it commits or rolls back)", n)
}

// Intent is an open write on some tables. End must be called exactly once,
// after the backend has answered the write (successfully or not: a failed
// statement may still have changed rows, e.g. a multi-row INSERT under a
// non-transactional engine, so the version is bumped either way).
type Intent struct {
	tables []TableID
	end    func() map[TableID]Version
	ended  bool
}

// NewIntent returns an open intent on tables; end, called once by the
// first End, closes it and returns each table's new version.
func NewIntent(tables []TableID, end func() map[TableID]Version) *Intent {
	return &Intent{tables: append([]TableID(nil), tables...), end: end}
}

// Tables lists the tables the intent covers.
func (in *Intent) Tables() []TableID { return in.tables }

// End closes the intent and returns each table's new version. Calling it
// again returns nil and changes nothing.
func (in *Intent) End() map[TableID]Version {
	if in == nil || in.ended {
		return nil
	}
	in.ended = true
	return in.end()
}
