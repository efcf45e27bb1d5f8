// Package mysqlwire is the one copy of the MySQL client/server protocol's
// small codecs and of the quoting of names and literals in SQL the proxy
// writes itself: length-encoded integers and strings, packet headers, the
// OK, ERR and EOF packets, and backquoted identifiers and quoted string
// literals. The proxy, the cache, the online ADD INDEX jobs, the virtual
// schema and the plugins all call it, so a fix to one of these rules is
// made once.
//
// The readers never read past the slice they are given: a truncated value
// reports ok=false rather than panicking, since the bytes may come from a
// client. The appenders append to the caller's buffer and allocate only
// when it must grow, so a hot path that reuses its buffers stays free of
// allocations.
//
// It imports the standard library and go-mysql's mysql package (for
// MyError and the protocol's constants) only; it knows nothing of the
// packages that use it.
package mysqlwire
