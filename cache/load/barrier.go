package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/binlog"
	"tableproxy/cache/eval"
)

// A copy must hold every write the binary log showed before its load
// began. The log alone does not promise that: the backend writes a
// transaction to its binary log (where the watcher may read it at once and
// bump the table's version) before its storage engine commits it, so a
// load that starts in between reads the rows as they were, at the new
// version, and the stale copy would be served until the next write.
// MariaDB and MySQL both send a transaction to replicas in that window
// (MySQL's "after sync" semi-synchronous replication is built on it).
//
// MariaDB closes it: a consistent snapshot reports the binary log position
// it corresponds to (the Binlog_snapshot_file and _position status
// variables, kept in commit order), so the loader reads where the log ends
// before it takes its snapshot and takes another until the snapshot has
// reached that point, which the engine's commit reaches within moments.
// A backend that does not report snapshot positions (MySQL) keeps the
// window; docs/cached-tables.md, "Writes that bypass the proxy", says so.

// maxBarrierWait bounds how long a load waits for its snapshot to reach the
// log's end; past it the load fails, and is retried as any failed load.
const maxBarrierWait = 5 * time.Second

// snapshotPosition reads the binary log position that the session's
// consistent snapshot corresponds to; ok is false when the backend does
// not report one.
func snapshotPosition(conn *client.Conn) (pos mysql.Position, ok bool, err error) {
	r, err := conn.Execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return pos, false, err
	}
	defer r.Close()
	var file, offset bool
	for i := 0; i < r.RowNumber(); i++ {
		switch strings.ToLower(eval.ResultString(r, i, 0)) {
		case "binlog_snapshot_file":
			pos.Name, file = eval.ResultString(r, i, 1), true
		case "binlog_snapshot_position":
			n, perr := strconv.ParseUint(eval.ResultString(r, i, 1), 10, 32)
			if perr != nil {
				return pos, false, nil
			}
			pos.Pos, offset = uint32(n), true
		}
	}
	return pos, file && offset && pos.Name != "", nil
}

// logBefore reports whether binary log position a comes before b. Log
// files are numbered in order (name.000009, name.000010, ..., and past
// 999999 the number grows a digit).
func logBefore(a, b mysql.Position) bool {
	if a.Name != b.Name {
		if len(a.Name) != len(b.Name) {
			return len(a.Name) < len(b.Name)
		}
		return a.Name < b.Name
	}
	return a.Pos < b.Pos
}

// startSnapshot starts the read-only transaction a load reads in, once its
// snapshot holds everything the binary log held when it was called (see
// above). The wait is bounded by ctx and maxBarrierWait. unchecked says
// why the snapshot could not be checked, if it could not: the backend
// reports no snapshot position, or the loading user may not read where
// the log ends. end, when a test sets it, replaces where the log ends.
func startSnapshot(ctx context.Context, conn *client.Conn, end func(*client.Conn) (mysql.Position, error)) (unchecked string, err error) {
	if end == nil {
		end = func(c *client.Conn) (mysql.Position, error) { return binlog.End(c) }
	}
	barrier, berr := end(conn)
	switch {
	case errors.Is(berr, binlog.ErrLogOff):
		// Nothing to wait for (barrier is empty): no write is seen in the
		// log either, and copies are not served on its account.
	case berr != nil:
		unchecked = "the loading user cannot read where the binary log ends (it needs BINLOG MONITOR or REPLICATION CLIENT): " + berr.Error()
	}
	deadline := time.Now().Add(maxBarrierWait)
	pause := time.Millisecond
	for {
		if _, err := conn.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
			return "", err
		}
		if unchecked != "" || barrier.Name == "" {
			return unchecked, nil
		}
		at, ok, err := snapshotPosition(conn)
		if err != nil {
			return "", err
		}
		if !ok {
			return "the backend reports no binary log position for a snapshot (Binlog_snapshot_position)", nil
		}
		if !logBefore(at, barrier) {
			return "", nil
		}
		if _, err := conn.Execute("COMMIT"); err != nil {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the backend's snapshot stayed at binary log position %s, before %s, the log's end when the load began, for %s",
				at, barrier, maxBarrierWait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
