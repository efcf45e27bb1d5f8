// Package binlog follows the backend's binary log for the whole proxy: one
// replication stream, one server id, one user, one reconnect policy, which
// every part of the proxy that needs the log subscribes to (the cache, to
// see writes that bypass the proxy; ADD INDEX jobs, to see the changes to
// the table they copy). The backend serves one stream per proxy.
//
// A subscriber names the position it starts from and gets every event that
// ends after it, in log order, on the follower's goroutine. One that needs
// an older position than the stream has reached (a job resumed from its
// checkpoint) has the stream started again from there; subscribers already
// past that point get nothing twice. The package also owns the statement
// that asks where the log ends (SHOW MASTER STATUS, or its MySQL 8.4 name).
//
// What can go wrong, and what is done: the stream breaks (backend restart,
// network, a purged log file): every subscriber it was serving is told, and
// the stream is tried again with backoff for those that resume; the others
// end there. A subscriber's handler is slow: every subscriber waits, since
// the stream is one.
//
// It imports go-mysql only; the proxy's connector reaches it through the
// small Backend interface it declares.
package binlog
