package cache

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/binlog"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// The watcher follows the backend's binary log (ROW format) and bumps the
// version of every cached table that a write bypassing the proxy changed
// (another application, a cron job, a DBA at the console), so the stale copy
// stops being served. Writes through the proxy show up there too and bump
// the version once more; that costs a reload, never a wrong answer.
//
// Such writes are seen with a delay: the time the backend takes to send the
// event plus the time to read it. Until the event arrives a cached read may
// still return the row as it was before the write. Whenever the stream
// breaks, every cached table is invalidated, since events may have been
// missed, and reads go to the backend until the watcher follows again.
//
// The watcher is a subscriber of the proxy's binary log follower (package
// binlog), which owns the stream, its reconnection and backoff; it follows
// from the log's end, and from the log's end again after every break.
type watcher struct {
	p    *Plugin
	user string

	following atomic.Bool
	problem   atomic.Pointer[string]
	events    atomic.Uint64 // invalidations caused by the log

	// lastEvent is when the stream last delivered an event, heartbeats
	// included (UnixNano). caughtUp says the proxy has read the log up to
	// about now: it turns false when the stream has been silent for
	// longer than stallAfter (the backend sends a heartbeat every
	// binlog.HeartbeatPeriod when it has nothing else), and true again at
	// the next heartbeat (sent only when the backend has nothing else to
	// send) or event written in the current second.
	lastEvent atomic.Int64
	caughtUp  atomic.Bool

	// tellMu orders what tell passes on: each change of following or
	// caughtUp is followed by a tell that reads them after it.
	tellMu sync.Mutex
}

// stallAfter is how long a stream may be silent: past it, it has stalled,
// and cached reads stop until it has caught up (see watcher.caughtUp).
const stallAfter = 4 * binlog.HeartbeatPeriod

// status describes the watcher for tableproxy.cached_tables.
func (w *watcher) status() string {
	if w == nil {
		return "none"
	}
	if r := w.p.viaLeader(); r != nil {
		if r.BinlogWatched() {
			return "binlog (through the leader)"
		}
		return "binlog (the leader has not caught up)"
	}
	if w.following.Load() {
		if !w.caughtUp.Load() {
			return "binlog (catching up)"
		}
		return "binlog"
	}
	if p := w.problem.Load(); p != nil {
		return "binlog unavailable: " + *p
	}
	return "binlog starting"
}

func (w *watcher) fail(err error) {
	msg := err.Error()
	w.problem.Store(&msg)
	w.following.Store(false)
	w.tell()
}

// tell passes on, in a cluster, whether this proxy follows the log and
// has caught up: the other proxies answer from memory only while the
// leader's follower has (see Leases).
func (w *watcher) tell() {
	w.tellMu.Lock()
	defer w.tellMu.Unlock()
	w.p.leases.SetBinlogWatched(w.following.Load() && w.caughtUp.Load())
}

// run follows the log until stop is closed, while this proxy is the one
// that follows it: always on one proxy, only the leader in a cluster.
func (w *watcher) run(stop <-chan struct{}) {
	for {
		if !w.p.followsBinlogHere() {
			w.following.Store(false)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if !w.follow(stop) {
			return
		}
	}
}

// follow subscribes to the log until stop is closed (false) or this proxy
// no longer leads its cluster (true), and meanwhile notes a stream that
// has gone silent.
func (w *watcher) follow(stop <-chan struct{}) bool {
	r := &logReader{w: w, bumped: map[lease.TableID]bool{}, checked: map[lease.TableID]bool{}}
	sub := w.p.binlog.Subscribe(binlog.Subscriber{Resume: true, User: w.user,
		Started: r.started, Event: r.event, Broken: r.broken})
	defer sub.Close()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-t.C:
			if w.following.Load() && time.Since(time.Unix(0, w.lastEvent.Load())) > stallAfter && w.caughtUp.Swap(false) {
				w.tell()
				w.p.log.Warn("cache: the binary log stream is silent; cached reads go to the backend until it catches up", "silent_for", stallAfter)
			}
			if !w.p.followsBinlogHere() {
				sub.Close()
				w.following.Store(false)
				w.tell()
				return true
			}
		}
	}
}

// logReader is one subscription's reading of the log.
type logReader struct {
	w *watcher
	// bumped are the tables bumped for the transaction being read: its
	// rows events often name a table many times, and one bump is enough,
	// since a load after it waits until its snapshot holds the whole
	// transaction (see cache/load's startSnapshot).
	bumped   map[lease.TableID]bool
	catching catchUp
	// annotate is the text of the statement whose row events follow
	// (MariaDB's Annotate_rows), "" when the log gives none; checked
	// are the cached tables its row events were checked for.
	annotate string
	checked  map[lease.TableID]bool
}

func (r *logReader) started(at mysql.Position) {
	w := r.w
	// Writes between the last event seen before (if any) and at are
	// unknown: every copy loaded before now is suspect.
	w.p.invalidateAll()
	clear(r.bumped)
	w.lastEvent.Store(time.Now().UnixNano())
	w.caughtUp.Store(true) // (at is where the log ended a moment ago)
	w.following.Store(true)
	w.problem.Store(nil)
	w.tell()
	w.p.log.Info("cache: following the binary log", "from", at.String())
}

func (r *logReader) broken(err error) {
	w := r.w
	w.fail(err)
	w.p.invalidateAll()
	w.p.log.Warn("cache: binary log watcher stopped; cached reads go to the backend until it follows again", "err", err)
}

func (r *logReader) event(ev *replication.BinlogEvent, read mysql.Position) error {
	w := r.w
	w.lastEvent.Store(time.Now().UnixNano())
	switch e := ev.Event.(type) {
	case *replication.MariadbAnnotateRowsEvent:
		r.annotate = string(e.Query)
		clear(r.checked)
	case *replication.RowsEvent:
		if e.Table != nil {
			id := lease.TableID{Schema: string(e.Table.Schema), Table: string(e.Table.Table)}
			if !r.bumped[id] && w.invalidate(id) {
				r.bumped[id] = true
			}
			if r.annotate != "" && !r.checked[id] {
				r.checked[id] = true
				w.checkPredicted(id, r.annotate)
			}
			if id.Schema == "mysql" && !r.bumped[privilegesID] {
				// The grant tables, written directly.
				r.bumped[privilegesID] = true
				w.p.leases.Invalidate(privilegesID)
				w.p.leases.Invalidate(accountsID)
			}
		}
	case *replication.XIDEvent, *replication.MariadbGTIDEvent, *replication.GTIDEvent, *replication.RotateEvent:
		clear(r.bumped) // a transaction's end or start
		r.annotate = ""
	case *replication.QueryEvent:
		clear(r.bumped)
		r.annotate = ""
		q := string(e.Query)
		if strings.EqualFold(q, "BEGIN") || strings.EqualFold(q, "COMMIT") {
			break
		}
		if w.p.swaps.seen(q) {
			// An online ADD INDEX's swap: the same rows under the same
			// name (swaps.go).
			w.p.log.Info("cache: a cached table's online ADD INDEX swapped its copy in; the cached copy stays", "statement", q)
			break
		}
		a, _ := plugins.Analyze(q, string(e.Schema))
		if a.Effect == plugins.EffectUnknown || a.Effect == plugins.EffectDDL {
			w.p.forgetIndirect() // (a view or a trigger may have come or gone)
		}
		// A cached table dropped or renamed (here or on the backend
		// directly) leaves the cache: its name may next hold another table.
		for _, id := range a.Dropped {
			w.p.tableGone(lease.TableID(id), "dropped or renamed on the backend")
		}
		if a.DropSchema != "" {
			for _, id := range w.p.cachedIDs() {
				if strings.EqualFold(id.Schema, a.DropSchema) {
					w.p.tableGone(id, "its database was dropped")
				}
			}
		}
		if a.Accounts {
			// GRANT, REVOKE, CREATE USER, FLUSH PRIVILEGES, ...
			w.p.leases.Invalidate(privilegesID)
			w.p.leases.Invalidate(accountsID)
		}
		switch a.Effect {
		case plugins.EffectUnknown:
			w.p.invalidateAll()
		case plugins.EffectWrite, plugins.EffectDDL:
			if a.IndexOnly {
				break // no row or column changed
			}
			tables := a.Tables
			if a.Effect == plugins.EffectDDL && plugins.SingleStatement(q) {
				// Only the tables it defines: CREATE TABLE x LIKE t (an
				// online ADD INDEX's shadow) or ... SELECT FROM t reads t.
				tables = a.Targets
			}
			changed := false
			for _, id := range tables {
				if w.invalidate(lease.TableID(id)) {
					changed = true
					w.checkPredicted(lease.TableID(id), q)
				}
			}
			if changed && a.Effect == plugins.EffectDDL {
				// Its columns may have changed: a shape refused for a
				// column it lacked (or planned on the old ones) is planned
				// again.
				w.p.forgetPlans()
			}
			if a.DropSchema != "" {
				for _, id := range w.p.cachedIDs() {
					if strings.EqualFold(id.Schema, a.DropSchema) {
						w.invalidate(id)
					}
				}
			}
		}
	}
	if !w.caughtUp.Load() && r.catching.reached(w, ev, read) {
		// (After the event's invalidations.)
		w.caughtUp.Store(true)
		w.tell()
		w.p.log.Info("cache: the binary log stream has caught up; cached reads resume", "at", read.String())
	}
	return nil
}

// catchUp decides when a stream that was silent (see watcher.caughtUp)
// has caught up: at a heartbeat, which the backend sends only when it has
// nothing else to send, or once it has read as far as the log reached a
// moment ago (asked of the backend at most every 200 ms).
type catchUp struct {
	target   mysql.Position
	targetAt time.Time
}

func (c *catchUp) reached(w *watcher, ev *replication.BinlogEvent, read mysql.Position) bool {
	if binlog.IsHeartbeat(ev) {
		return true
	}
	if read.Name == "" {
		return false
	}
	if c.target.Name == "" || time.Since(c.targetAt) > 200*time.Millisecond {
		target, err := w.currentPosition()
		if err != nil {
			return false
		}
		c.target, c.targetAt = target, time.Now()
	}
	return read.Compare(c.target) >= 0
}

// checkPredicted counts a write of the cached table id by the statement
// text that this proxy sent with an account that did not name id (see
// predictions.go).
func (w *watcher) checkPredicted(id lease.TableID, text string) {
	ts := w.p.table(id)
	if ts == nil || !w.p.predicts.missedBy(text, id) {
		return
	}
	ts.missed.Add(1)
	w.p.predicts.noteMissed(w.p.log, id, text)
}

// invalidate bumps id's version if it is cached, and says whether it was.
func (w *watcher) invalidate(id lease.TableID) bool {
	if w.p.table(id) == nil {
		return false
	}
	w.events.Add(1)
	w.p.leases.Invalidate(id)
	return true
}

// currentPosition asks the backend where its binary log ends now.
func (w *watcher) currentPosition() (mysql.Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := w.p.backend.Connect(ctx, w.user, "")
	if err != nil {
		return mysql.Position{}, err
	}
	defer conn.Close()
	return binlog.End(conn)
}
