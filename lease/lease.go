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
