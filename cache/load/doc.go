// Package load reads a cached table's snapshot from the backend: the whole
// table in one consistent read (Snapshot), its column collations and the
// exact values of its FLOAT and DOUBLE columns, in a read that has reached
// the binary log's end (barrier.go), and whether a table can be kept as a
// copy at all (PrimaryKey, UnservableShape). Package cache decides when to
// load, tags the copy with its version, and serves it.
//
// Imports: go-mysql (the connection a load reads on), lease (table names
// and versions), binlog (the position the log ends at), internal/mysqlwire,
// and cache/eval (the Snapshot type it builds); never package cache.
package load
