package lease

import "context"

// Log is the replicated log the Raft-backed Manager stands on, and the
// way to the other proxies' managers. Package cluster implements it; this
// package never imports Raft.
type Log interface {
	// ID names this proxy in the cluster; Incarnation tells this process
	// from its earlier runs.
	ID() string
	Incarnation() uint64
	// Renew commits a renewal of this proxy's lease and returns its index.
	Renew(ctx context.Context) (uint64, error)
	// OpenIntent commits intent id on tables and returns its index only
	// once every other proxy that may be serving them from memory has
	// stopped (it acknowledged, or its lease ran out): the leader's
	// manager sees to that (Raft.RevokeOthers). This proxy is not asked:
	// the caller stops its own copies, until it has applied the index
	// returned. Retrying an id is safe.
	OpenIntent(ctx context.Context, id string, tables []TableID) (uint64, error)
	// CloseIntent commits the end of intent id; its tables' versions go up.
	CloseIntent(ctx context.Context, id string) error
	// Bump commits a version bump of tables.
	Bump(ctx context.Context, tables []TableID) error
	// IsLeader reports whether this node leads now (for duties only).
	IsLeader() bool
	// SetBinlogWatched says, while this node leads, whether it follows
	// the backend's binary log and has caught up with it.
	// BinlogWatched reports whether the current term's leader has said
	// it does (as far as this node has applied the log).
	SetBinlogWatched(ok bool)
	BinlogWatched() bool
	// SendRevocation delivers r to the proxy that answers revocations at
	// addr (to its Revoke or RevokeIntent) and returns once it has
	// acknowledged.
	SendRevocation(ctx context.Context, addr string, r Revocation) error
	// AwaitAppended reports, as soon as this node (leading) knows it,
	// whether member node has stored the log up to index, which stops it
	// serving the tables of every intent opened up to there; false if ctx
	// ends first. The leader asks only the members that have not.
	AwaitAppended(ctx context.Context, node string, index uint64) bool
}

// Revocation asks a proxy to stop serving Tables until it has applied the
// log up to Index or, when Index is 0, the intent named Intent.
type Revocation struct {
	Tables []TableID
	Index  uint64
	Intent string
}

// Holder is a member whose lease renewal the log applied: the incarnation
// that renewed, and where it answers revocations.
type Holder struct {
	Node string
	Inc  uint64
	Addr string
}

// Writer is the process that proposed an intent (its node and
// incarnation).
type Writer struct {
	Node string
	Inc  uint64
}
