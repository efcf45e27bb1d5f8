// Package lease decides whether this proxy may answer reads of a cached
// table from memory, and at which version of the table; it holds the
// whole lease protocol of a cluster of proxies, both halves.
//
// Every table has a version that only goes up: every write through a proxy
// and every change seen in the backend's binary log bumps it. A reader may
// use an in-memory copy of table T only if the copy was loaded at T's
// current version and no write to T is in flight. A writer opens an intent
// before its statement reaches the backend and closes it after the backend
// has answered; while any intent on T is open, reads of T go to the
// backend. Closing the intent bumps the version, so a copy loaded before the
// write can never be served after it: reads through the proxy see their own
// writes and every write that completed before them.
//
// Main types: Manager (the decision, as the cache sees it: Table, Intent),
// and Raft, the Manager every proxy runs (a proxy on its own, on a cluster
// of one). Raft stands on Log, the replicated log declared here (log.go)
// and provided by package cluster. Its files:
//   - raft.go: the lease terms, this proxy's lease (renewals), and each
//     table's state as the log applies it (Servable);
//   - write.go: write intents, shared by this proxy's writes to the same
//     tables;
//   - invalidate.go: bumps for changes the binary log shows, and the
//     leader's word on whether that log is followed;
//   - revoke.go: the holder's half of revocation (stop serving when asked);
//   - leader.go: the leader's half: who may be serving, revoking them for
//     a write, waiting out the ones that do not answer.
//
// Imports: the standard library only. Never Raft or package cluster: the
// log is behind Log, and what it applies reaches Raft through its methods
// (TableState, IntentApplied, Renewed, Applied, ...).
//
// What can go wrong: a version that went backwards, or an intent closed
// twice, would let a stale copy be served; the implementation makes both
// impossible by construction (versions are only ever incremented, an Intent
// closes once). A lease counted wrongly would let a proxy serve after the
// leader stopped waiting for it: the holder counts from before it sent its
// renewal, the leader from after it applied it, and a margin covers clocks
// that drift apart.
package lease
