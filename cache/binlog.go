package cache

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

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
	// heartbeatPeriod when it has nothing else), and true again at the
	// next heartbeat (sent only when the backend has nothing else to send)
	// or event written in the current second.
	lastEvent atomic.Int64
	caughtUp  atomic.Bool

	// tellMu orders what tell passes on: each change of following or
	// caughtUp is followed by a tell that reads them after it.
	tellMu sync.Mutex
}

// heartbeatPeriod is how often the backend sends a heartbeat on an idle
// stream; a stream silent for stallAfter has stalled, and cached reads
// stop until it has caught up (see watcher.caughtUp).
const (
	heartbeatPeriod = 250 * time.Millisecond
	stallAfter      = 4 * heartbeatPeriod
)

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
// leader's follower has (see binlogRole).
func (w *watcher) tell() {
	r, ok := w.p.leases.(binlogRole)
	if !ok {
		return
	}
	w.tellMu.Lock()
	defer w.tellMu.Unlock()
	r.SetBinlogWatched(w.following.Load() && w.caughtUp.Load())
}

// run follows the log until stop is closed, restarting after failures.
func (w *watcher) run(stop <-chan struct{}) {
	backoff := 200 * time.Millisecond
	for {
		if !w.p.followsBinlogHere() {
			// In a cluster only the leader follows the log.
			w.following.Store(false)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		began := time.Now()
		err := w.follow(stop)
		if errors.Is(err, errNotFollower) {
			continue
		}
		if time.Since(began) > 30*time.Second {
			// The stream was up for a while: this break is a new one,
			// retried soon (in a cluster every proxy's memory reads wait).
			backoff = 200 * time.Millisecond
		}
		select {
		case <-stop:
			return
		default:
		}
		w.fail(err)
		w.p.invalidateAll()
		w.p.log.Warn("cache: binary log watcher stopped; cached reads go to the backend until it follows again", "err", err, "retry_in", backoff)
		select {
		case <-stop:
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func (w *watcher) follow(stop <-chan struct{}) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var demoted atomic.Bool
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if w.following.Load() && time.Since(time.Unix(0, w.lastEvent.Load())) > stallAfter && w.caughtUp.Swap(false) {
					w.tell()
					w.p.log.Warn("cache: the binary log stream is silent; cached reads go to the backend until it catches up", "silent_for", stallAfter)
				}
				if !w.p.followsBinlogHere() {
					demoted.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	defer func() {
		if demoted.Load() {
			w.following.Store(false)
			w.tell()
		}
	}()
	pos, err := w.currentPosition(ctx)
	if err != nil {
		return err
	}
	syncer, err := w.p.backend.Binlog(w.user, replication.BinlogSyncerConfig{
		ServerID:         randomServerID(),
		HeartbeatPeriod:  heartbeatPeriod,
		ReadTimeout:      5 * time.Second,
		DisableRetrySync: true, // a break is handled here: invalidate, then resume
		Logger:           quietLogger(w.p.log),
		// Only which table changed matters, not the rows: skip decoding them.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
	})
	if err != nil {
		return err
	}
	defer syncer.Close()
	streamer, err := syncer.StartSync(pos)
	if err != nil {
		return fmt.Errorf("start binlog stream at %s: %w", pos, err)
	}
	// Writes between the last event seen before (if any) and pos are
	// unknown: every copy loaded before now is suspect.
	w.p.invalidateAll()
	w.lastEvent.Store(time.Now().UnixNano())
	w.caughtUp.Store(true) // (pos is where the log ended a moment ago)
	w.following.Store(true)
	w.problem.Store(nil)
	w.tell()
	w.p.log.Info("cache: following the binary log", "from", pos.String())
	// The tables bumped for the transaction being read: its rows events
	// often name a table many times, and one bump is enough, since a load
	// after it waits until its snapshot holds the whole transaction (see
	// startSnapshot).
	bumped := map[lease.TableID]bool{}
	read := pos // how far the stream has been read
	var catching catchUp
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if demoted.Load() {
				return errNotFollower
			}
			return err
		}
		w.lastEvent.Store(time.Now().UnixNano())
		switch e := ev.Event.(type) {
		case *replication.RowsEvent:
			if e.Table != nil {
				id := lease.TableID{Schema: string(e.Table.Schema), Table: string(e.Table.Table)}
				if !bumped[id] && w.invalidate(id) {
					bumped[id] = true
				}
				if id.Schema == "mysql" && !bumped[privilegesID] {
					// The grant tables, written directly.
					bumped[privilegesID] = true
					w.p.leases.Invalidate(privilegesID)
					w.p.leases.Invalidate(accountsID)
				}
			}
		case *replication.XIDEvent, *replication.MariadbGTIDEvent, *replication.GTIDEvent, *replication.RotateEvent:
			clear(bumped) // a transaction's end or start
		case *replication.QueryEvent:
			clear(bumped)
			q := string(e.Query)
			if strings.EqualFold(q, "BEGIN") || strings.EqualFold(q, "COMMIT") {
				break
			}
			a, _ := plugins.Analyze(q, string(e.Schema))
			if a.Effect == plugins.EffectUnknown || a.Effect == plugins.EffectDDL {
				w.p.forgetIndirect() // (a view or a trigger may have come or gone)
			}
			switch a.Effect {
			case plugins.EffectUnknown:
				w.p.invalidateAll() // (privileges too: GRANT, REVOKE, FLUSH PRIVILEGES, ...)
			case plugins.EffectWrite, plugins.EffectDDL:
				for _, id := range a.Tables {
					w.invalidate(lease.TableID(id))
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
		if e, ok := ev.Event.(*replication.RotateEvent); ok {
			read = mysql.Position{Name: string(e.NextLogName), Pos: uint32(e.Position)}
		} else if ev.Header.LogPos > 0 {
			read.Pos = ev.Header.LogPos
		}
		if !w.caughtUp.Load() && catching.reached(ctx, w, ev.Header, read) {
			// (After the event's invalidations.)
			w.caughtUp.Store(true)
			w.tell()
			w.p.log.Info("cache: the binary log stream has caught up; cached reads resume", "at", read.String())
		}
	}
}

// catchUp decides when a stream that was silent (see watcher.caughtUp)
// has caught up: at a heartbeat, which the backend sends only when it has
// nothing else to send, or once it has read as far as the log reached a
// moment ago (asked of the backend at most every 200 ms).
type catchUp struct {
	target   mysql.Position
	targetAt time.Time
}

func (c *catchUp) reached(ctx context.Context, w *watcher, h *replication.EventHeader, read mysql.Position) bool {
	switch h.EventType {
	case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
		return true
	}
	if read.Name == "" {
		return false
	}
	if c.target.Name == "" || time.Since(c.targetAt) > 200*time.Millisecond {
		target, err := w.currentPosition(ctx)
		if err != nil {
			return false
		}
		c.target, c.targetAt = target, time.Now()
	}
	return read.Compare(c.target) >= 0
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
func (w *watcher) currentPosition(ctx context.Context) (mysql.Position, error) {
	conn, err := w.p.backend.Connect(ctx, w.user, "")
	if err != nil {
		return mysql.Position{}, err
	}
	defer conn.Close()
	return binlogEnd(conn)
}

// errNotFollower ends following when this proxy stops leading its cluster.
var errNotFollower = errors.New("no longer the proxy that follows the binary log")

// randomServerID picks a replica server id unlikely to clash with a real
// replica's or another proxy's.
func randomServerID() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return 1<<30 | binary.LittleEndian.Uint32(b[:])>>2
}
