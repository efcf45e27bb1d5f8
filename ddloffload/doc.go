// Package ddloffload owns online ADD INDEX: it intercepts ALTER TABLE ...
// ADD INDEX and CREATE INDEX on the plugin chain and runs each as a job of
// explicit stages (preflight, shadow, binlog, backfill, catch-up, build,
// verify, cut-over, cleanup) against the backend, while the application
// keeps reading and writing the table. The client that sent the statement
// waits for the job, as it would for native DDL, and gets OK or the error
// MySQL would give; other sessions watch jobs with ADMIN SHOW DDL JOBS.
//
// What can go wrong, and what stops it: a row changed while it is copied
// (every change after the job's starting binary-log position marks its key
// dirty, and dirty keys are copied again from the table, so the shadow
// converges whatever order copies and changes happened in); a write that
// bypasses the proxy during the swap (the table is read-locked, so writers
// wait and readers go on, while the last changes are applied and the
// RENAME is queued behind that lock); a duplicate for a UNIQUE index (the
// external sort finds it after the copy, and the backend's own index build
// on the shadow any made later, before anything is swapped); DDL on the
// table during the job, or a break in the binary log (the job fails and
// drops its shadow; the original table is never touched until the atomic
// RENAME); a proxy stop, kill -9 included (the job's state and checkpoint
// are in the jobs file, the ranges copied since in the job's range log, and
// the next start resumes it, copying again at most the ranges its workers
// were copying).
//
// It imports plugins (the API it implements), binlog (the proxy's
// follower it subscribes to), configs (sizes), and internal helpers; it
// knows nothing of the cache, the leases or the cluster: it announces its
// swap's RENAME through a hook the command gives it (SwapHook), so that a
// cached table keeps its copy through the swap.
package ddloffload
