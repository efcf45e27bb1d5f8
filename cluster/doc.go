// Package cluster keeps tableproxy's replicated state in a Raft log
// (hashicorp/raft), and is the only package that imports Raft: the
// catalog of cached tables, each table's version, open write intents, and
// the proxies' lease renewals. Never table data: every proxy loads rows
// from the backend itself.
//
// A node stores its log in raft-wal (segment files, one fsync per append
// batch, no B-tree to rewrite: appends are what this log does all day, and
// raft-wal appended an entry in well under a millisecond on the machines we
// measured) and its snapshots as files, both under <data-dir>/raft. One
// TCP address carries Raft's RPCs and a small HTTP API (see mux.go): join,
// propose (followers send their entries to the leader), revoke (the leader
// tells a proxy to stop serving tables) and remove.
//
// A proxy started without cluster flags bootstraps a cluster of one. With
// --join it asks any member to add it (idempotently) and never bootstraps.
//
// Revocation (Chubby's, instead of waiting out every lease as TiDB does):
// the leader queues a write intent and, while it commits, asks every other
// proxy whose lease may still be valid to stop serving the intent's tables
// until it has applied the intent (the writer stops its own copies); a
// proxy that does not answer is waited out until its lease has expired by
// the leader's clock. Only then does the writer run its statement on the
// backend.
//
// What can go wrong: a leader that lost its quorum cannot commit intents
// (writes wait, then pass through and their tables are bumped when the
// cluster recovers); hashicorp/raft's leader lease is not a read lease, so
// nothing here answers a question from a leader's memory without going
// through the log first.
package cluster
