// Package cluster keeps tableproxy's replicated state in a Raft log
// (hashicorp/raft, the released module), and is the only package that
// imports Raft: the catalog of cached tables, each table's version, open
// write intents, and the proxies' lease renewals. Never table data: every
// proxy loads rows from the backend itself. What the lease protocol does
// with that state (when a proxy may serve, whom the leader revokes) is
// package lease's; this package is the log and the transport under it.
//
// Main types: Node, one member (it implements lease.Log), opened with a
// Config that names its lease protocol (Leases, which lease.Raft is);
// Admin and MembersTable, the cluster's admin SQL and
// tableproxy.cluster_members. The FSM and the log's entries are private.
// Files by job:
//   - node.go: opening a node (log store, snapshots, Raft, bootstrap or
//     join) and closing it;
//   - leader.go: who leads, as this node knows it;
//   - log.go: the operations others commit (lease.Log's, the catalog's);
//   - propose.go: proposing through the leader, appending as the leader;
//   - bumps.go: the bumps a leader defers while intents are open;
//   - renewals.go: the renewals a leader appends together;
//   - binlogword.go: the leader's word on the backend's binary log;
//   - command.go: one type per log operation, and their encoding;
//   - fsm.go: the state, applying entries, snapshots;
//   - membership.go: join, add and remove members, Members;
//   - reaper.go: removing silent non-voters, and non-voters leaving;
//   - ready.go: a newly cached table, ready once every member learned of it;
//   - api.go, mux.go: the HTTP API and Raft on one port;
//   - admin.go: ADMIN CLUSTER REMOVE NODE and cluster_members;
//   - logcache.go: a voter's newest entries in memory;
//   - walfix.go: reading back segments raft-wal truncated.
//
// A node stores its log in raft-wal (segment files, one fsync per append
// batch, no B-tree to rewrite: appends are what this log does all day, and
// raft-wal appended an entry in well under a millisecond on the machines we
// measured) and its snapshots as files, both under <data-dir>/raft. One
// TCP address carries Raft's RPCs and a small HTTP API (see mux.go): join,
// propose (followers send their entries to the leader), revoke (the leader
// tells a proxy to stop serving tables), remove and leave.
//
// A proxy started without cluster flags bootstraps a cluster of one. With
// --join it asks any member to add it (idempotently) and never bootstraps.
//
// Every value in the replicated state comes from the log: a time in it is
// set by the proposer (a catalog entry's Since) or is a term, never the
// applying node's clock. When the leader applied a member's renewal, which
// it counts that member's lease from, is its own and lives in lease.
//
// Imports: hashicorp/raft and raft-wal, lease (table names, versions, and
// the lease protocol it serves), plugins and go-mysql's error codes (for
// the admin plugin). Only cmd/tableproxy imports this package.
//
// What can go wrong: a leader that lost its quorum cannot commit intents
// (writes wait, then pass through and their tables are bumped when the
// cluster recovers); hashicorp/raft's leader lease is not a read lease, so
// nothing here answers a question from a leader's memory without going
// through the log first.
package cluster
