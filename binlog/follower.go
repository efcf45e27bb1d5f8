package binlog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// HeartbeatPeriod is how often the backend sends a heartbeat on a stream
// that has nothing else to send: a subscriber that has heard nothing for a
// few periods knows the stream has stalled.
const HeartbeatPeriod = 250 * time.Millisecond

// ReportHost is the host name the stream registers with, which the backend
// shows in SHOW SLAVE HOSTS / SHOW REPLICAS: a proxy's stream is not a
// replica, and whoever lists the replicas (the online ADD INDEX jobs'
// throttle) can tell it apart.
const ReportHost = "tableproxy-binlog-stream"

const (
	// readTimeout ends a stream that has been silent for many heartbeats.
	readTimeout = 5 * time.Second
	// A broken stream is tried again after minBackoff, doubling up to
	// maxBackoff while it keeps failing; a stream that ran for steadyAfter
	// broke anew, and is retried soon.
	minBackoff  = 200 * time.Millisecond
	maxBackoff  = 5 * time.Second
	steadyAfter = 30 * time.Second
	// queryTimeout bounds the connection that asks where the log ends.
	queryTimeout = 10 * time.Second
)

// Backend opens what the follower needs: connections to ask where the log
// ends, and replication streams, as a configured proxy user.
type Backend interface {
	Connect(ctx context.Context, user, db string) (*client.Conn, error)
	Binlog(user string, cfg replication.BinlogSyncerConfig) (*replication.BinlogSyncer, error)
}

// Table names a table whose row images a subscriber needs decoded.
type Table struct{ Schema, Name string }

// Subscriber is what one part of the proxy wants of the log. Its functions
// are called on the follower's goroutine, one at a time, in log order; they
// must not call Close on their own subscription.
type Subscriber struct {
	// From is where the subscriber starts: it gets every event that ends
	// after From. Empty, it starts where the log ends when it subscribes,
	// or where the stream has read to if that is further.
	From mysql.Position
	// Resume: when the stream breaks, follow again from the log's end once
	// it runs again (Started is called again), instead of ending there.
	Resume bool
	// RowsOf are the tables whose rows events are delivered with their row
	// images decoded; other rows events carry their table only.
	RowsOf []Table
	// User reads the log when the follower was given no user of its own.
	User string

	// Started: the stream runs and has reached the subscriber's start, at.
	Started func(at mysql.Position)
	// Event is one event after the start; at is the log position after it.
	// Events that do not move the position (heartbeats, the descriptions a
	// stream begins with) come with the position they were read at. An
	// error ends the subscription (Broken is called with it).
	Event func(ev *replication.BinlogEvent, at mysql.Position) error
	// Broken: the stream broke, or Event failed. Unless the subscriber
	// resumes (and the stream broke), nothing is called after it.
	Broken func(err error)
}

// ErrClosed ends the subscriptions of a follower that is closed.
var ErrClosed = errors.New("the binary log follower is closed")

// Follower is the proxy's one reader of the backend's binary log.
type Follower struct {
	backend  Backend
	user     string
	log      *slog.Logger
	serverID uint32

	// mu guards the fields below; the run goroutine, Subscribe and Close
	// hold it briefly.
	mu      sync.Mutex
	running bool
	closed  bool
	added   []*Subscription
	removed []*Subscription
	wakeFn  context.CancelFunc // interrupts the run goroutine's wait
	wg      sync.WaitGroup

	// Owned by the run goroutine.
	live        []*Subscription
	at          mysql.Position // how far the stream has read
	confirmed   bool           // the backend has sent an event on the stream
	confirmedAt time.Time      // (the first)
	crc         bool           // its events end with a CRC32 checksum

	// For metrics, read by any goroutine: events delivered, the newest
	// event's time on the backend (Unix seconds; heartbeats carry none)
	// and when it was received, and the stream's position (file number
	// and offset).
	events         atomic.Uint64
	lastEventTime  atomic.Int64
	lastReceivedAt atomic.Int64
	posOffset      atomic.Uint64
}

// Stats are a follower's figures for metrics.
type Stats struct {
	Events uint64
	// LastEventTime is the newest event's time on the backend and
	// ReceivedAt when it was received here (zero before any): their
	// difference is how far the stream is behind the backend's writes.
	LastEventTime, ReceivedAt time.Time
	Offset                    uint64 // the stream's offset in its current log file
}

// Stats returns the follower's figures now.
func (f *Follower) Stats() Stats {
	st := Stats{Events: f.events.Load(), Offset: f.posOffset.Load()}
	if t := f.lastEventTime.Load(); t > 0 {
		st.LastEventTime = time.Unix(t, 0)
	}
	if t := f.lastReceivedAt.Load(); t > 0 {
		st.ReceivedAt = time.Unix(0, t)
	}
	return st
}

// New returns a follower reading as user ("" to read as the subscribers
// name), which opens its stream when the first subscriber comes and closes
// it when the last one leaves.
func New(backend Backend, user string, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.Default()
	}
	return &Follower{backend: backend, user: user, log: log, serverID: newServerID()}
}

// newServerID picks the proxy's replica server id, kept for its lifetime,
// in a range real replicas rarely use: bit 30 set, the rest random, so that
// proxies do not displace each other's streams.
func newServerID() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return 1<<30 | binary.LittleEndian.Uint32(b[:])>>2
}

// User is the user the follower reads the log as, or fallback when it was
// given none.
func (f *Follower) User(fallback string) string {
	if f.user != "" {
		return f.user
	}
	return fallback
}

// Subscription is one subscriber's place on the stream.
type Subscription struct {
	f *Follower
	s Subscriber

	// Owned by the run goroutine.
	resolved bool           // pos is known (an empty From is resolved to a position)
	pos      mysql.Position // what the subscriber has been given up to
	started  bool
	ended    bool

	closing bool // under f.mu: Close was called
	done    chan struct{}
}

// Subscribe adds a subscriber. Its functions are called until its
// subscription is closed or ends.
func (f *Follower) Subscribe(s Subscriber) *Subscription {
	sub := &Subscription{f: f, s: s, done: make(chan struct{}), pos: s.From, resolved: s.From.Name != ""}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		sub.s.Broken(ErrClosed)
		close(sub.done)
		return sub
	}
	f.added = append(f.added, sub)
	f.wakeLocked()
	if !f.running {
		f.running = true
		f.wg.Add(1)
		go f.run()
	}
	f.mu.Unlock()
	return sub
}

// Close ends the subscription; once it returns, none of the subscriber's
// functions is called any more.
func (s *Subscription) Close() {
	f := s.f
	f.mu.Lock()
	if !s.closing {
		s.closing = true
		f.removed = append(f.removed, s)
		f.wakeLocked()
	}
	f.mu.Unlock()
	<-s.done
}

// Close ends every subscription (Broken with ErrClosed) and the stream.
func (f *Follower) Close() {
	f.mu.Lock()
	f.closed = true
	f.wakeLocked()
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *Follower) wakeLocked() {
	if f.wakeFn != nil {
		f.wakeFn()
	}
}

// wakeContext returns a context that Subscribe, Close and Subscription.Close
// cancel: the run goroutine waits on it.
func (f *Follower) wakeContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.wakeFn = cancel
	if len(f.added) > 0 || len(f.removed) > 0 || f.closed {
		cancel() // (came in before this context did)
	}
	f.mu.Unlock()
	return ctx
}

// errRestart ends a stream that must start again from another position;
// errIdle one that nobody needs any more (the goroutine ends: settle said
// so, and another may already have started).
var (
	errRestart = errors.New("the stream starts again from another position")
	errIdle    = errors.New("no subscriber is left")
)

// run follows the log while anyone subscribes, and starts the stream again
// after a break, with backoff, for the subscribers that resume.
func (f *Follower) run() {
	defer f.wg.Done()
	backoff := minBackoff
	for {
		if _, alive := f.settle(); !alive {
			return
		}
		err := f.follow()
		switch {
		case errors.Is(err, errIdle):
			return
		case err == nil || errors.Is(err, errRestart):
			continue // (nil: the last one left; settle says whether one came)
		}
		if f.confirmed && time.Since(f.confirmedAt) > steadyAfter {
			backoff = minBackoff
		}
		if !f.broke(err) {
			continue // only subscribers that missed nothing are left: go on at once
		}
		f.log.Warn("binlog: the binary log stream broke", "err", err, "retry_in", backoff)
		ctx := f.wakeContext()
		select {
		case <-ctx.Done(): // a subscriber came or went: settle, and try now
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// settle takes in the subscriptions that came and went. alive is false,
// and the goroutine ends, when none is left or the follower closed;
// removedAny says some left.
func (f *Follower) settle() (removedAny, alive bool) {
	f.mu.Lock()
	added, removed, closed := f.added, f.removed, f.closed
	f.added, f.removed = nil, nil
	if len(added) == 0 && len(removed) == 0 && len(f.live) == 0 {
		f.running = false
		f.mu.Unlock()
		return false, false
	}
	f.mu.Unlock()
	for _, s := range removed {
		f.end(s)
	}
	f.live = append(f.live, added...)
	if closed {
		for _, s := range f.live {
			if !s.ended {
				s.s.Broken(ErrClosed)
				f.end(s)
			}
		}
		f.live = nil
		f.mu.Lock()
		f.running = false
		f.mu.Unlock()
		return true, false
	}
	f.prune()
	if len(f.live) == 0 {
		return f.settle() // (ends the goroutine, unless one came meanwhile)
	}
	return len(removed) > 0, true
}

// end removes s for good.
func (f *Follower) end(s *Subscription) {
	if !s.ended {
		s.ended = true
		close(s.done)
	}
}

func (f *Follower) prune() {
	live := f.live[:0]
	for _, s := range f.live {
		if !s.ended {
			live = append(live, s)
		}
	}
	clear(f.live[len(live):])
	f.live = live
}

// streamUser is who the stream logs in as.
func (f *Follower) streamUser() string {
	for _, s := range f.live {
		if s.s.User != "" {
			return f.User(s.s.User)
		}
	}
	return f.user
}

// logEnd asks the backend where the log ends, as the stream's user.
func (f *Follower) logEnd() (mysql.Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	conn, err := f.backend.Connect(ctx, f.streamUser(), "")
	if err != nil {
		return mysql.Position{}, err
	}
	defer conn.Close()
	return End(conn)
}

// resolve gives the subscribers that start "now" their position: where
// the log ends, or where the stream is if it has read further.
func (f *Follower) resolve() error {
	var end mysql.Position
	asked := false
	for _, s := range f.live {
		if s.resolved {
			continue
		}
		if !asked {
			var err error
			if end, err = f.logEnd(); err != nil {
				return err
			}
			asked = true
		}
		s.pos, s.resolved = end, true
		if f.confirmed && f.at.Compare(end) > 0 {
			s.pos = f.at
		}
	}
	return nil
}

// oldest is the oldest position a subscriber needs, and false when no
// subscriber has one yet.
func (f *Follower) oldest() (mysql.Position, bool) {
	var from mysql.Position
	found := false
	for _, s := range f.live {
		if s.resolved && (!found || s.pos.Compare(from) < 0) {
			from, found = s.pos, true
		}
	}
	return from, found
}

// follow runs one stream from the oldest position a subscriber needs,
// until it breaks (the error), must start again elsewhere (errRestart), or
// serves nobody (nil, or errIdle once settled). f.at is where it broke.
func (f *Follower) follow() error {
	f.confirmed = false
	if from, ok := f.oldest(); ok {
		f.at = from // (where a failure to resolve breaks it)
	}
	if err := f.resolve(); err != nil {
		return err
	}
	from, _ := f.oldest()
	f.at = from
	user := f.streamUser()
	syncer, err := f.backend.Binlog(user, replication.BinlogSyncerConfig{
		ServerID:                f.serverID,
		Localhost:               ReportHost, // how the backend lists this stream among its replicas
		HeartbeatPeriod:         HeartbeatPeriod,
		ReadTimeout:             readTimeout,
		DisableRetrySync:        true, // a break is handled here: subscribers are told, then it resumes
		TimestampStringLocation: time.UTC,
		Logger:                  quietLogger(f.log),
		// Row images are decoded as they are delivered, for the tables a
		// subscriber wants then (see decodeRows): the parser runs ahead.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
	})
	if err != nil {
		return err
	}
	defer syncer.Close()
	streamer, err := syncer.StartSync(from)
	if err != nil {
		return fmt.Errorf("start the binary log stream at %s: %w", from, err)
	}
	f.crc = false
	f.log.Debug("binlog: following the binary log", "from", from.String(), "user", user, "server_id", f.serverID, "subscribers", len(f.live))
	ctx := f.wakeContext()
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				return err
			}
			ctx = f.wakeContext()
			removedAny, alive := f.settle()
			if !alive {
				return errIdle
			}
			if err := f.takeIn(removedAny); err != nil {
				return err
			}
			continue
		}
		if !f.confirmed {
			f.confirmed, f.confirmedAt = true, time.Now()
		}
		f.deliver(ev)
		f.prune()
		if len(f.live) == 0 {
			return nil
		}
	}
}

// takeIn places the subscribers that came while the stream runs: it starts
// those at its position, and asks for a restart when one needs an older
// position, or when, after some left, all that are left are ahead of the
// stream (it would read for nobody).
func (f *Follower) takeIn(removedAny bool) error {
	if err := f.resolve(); err != nil {
		// The stream is well; those who start "now" are told, and those
		// that resume are placed again in a moment.
		again := false
		for _, s := range f.live {
			if !s.resolved {
				s.s.Broken(err)
				if s.s.Resume {
					again = true
				} else {
					f.end(s)
				}
			}
		}
		f.prune()
		if again {
			time.AfterFunc(minBackoff, func() {
				f.mu.Lock()
				f.wakeLocked()
				f.mu.Unlock()
			})
		}
	}
	ahead := len(f.live) > 0
	for _, s := range f.live {
		if !s.resolved {
			ahead = false
			continue
		}
		c := s.pos.Compare(f.at)
		if c < 0 && !s.started {
			return errRestart
		}
		if c <= 0 {
			ahead = false
		}
		if c == 0 && !s.started && f.confirmed {
			s.started = true
			s.s.Started(f.at)
		}
	}
	if removedAny && ahead {
		return errRestart
	}
	return nil
}

// advance is the log position after ev, read at at.
func advance(at mysql.Position, ev *replication.BinlogEvent) mysql.Position {
	if r, ok := ev.Event.(*replication.RotateEvent); ok {
		return mysql.Position{Name: string(r.NextLogName), Pos: uint32(r.Position)}
	}
	if ev.Header.LogPos > 0 && !IsHeartbeat(ev) {
		at.Pos = ev.Header.LogPos
	}
	return at
}

// IsHeartbeat says whether ev is a heartbeat: the backend has nothing else
// to send, the stream has read the whole log.
func IsHeartbeat(ev *replication.BinlogEvent) bool {
	t := ev.Header.EventType
	return t == replication.HEARTBEAT_EVENT || t == replication.HEARTBEAT_LOG_EVENT_V2
}

// deliver passes ev to every subscriber it is news to.
func (f *Follower) deliver(ev *replication.BinlogEvent) {
	if fd, ok := ev.Event.(*replication.FormatDescriptionEvent); ok {
		f.crc = fd.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
	}
	prev := f.at
	f.at = advance(prev, ev)
	f.events.Add(1)
	f.posOffset.Store(uint64(f.at.Pos))
	if ev.Header.Timestamp > 0 && !IsHeartbeat(ev) {
		f.lastEventTime.Store(int64(ev.Header.Timestamp))
		f.lastReceivedAt.Store(time.Now().UnixNano())
	}
	moved := f.at.Compare(prev) != 0
	rows, _ := ev.Event.(*replication.RowsEvent)
	var rowsErr error
	decoded := false
	for _, s := range f.live {
		if s.ended || !s.resolved {
			continue
		}
		c := f.at.Compare(s.pos)
		if c < 0 {
			continue // (ahead of the stream)
		}
		if !s.started {
			s.started = true
			s.s.Started(s.pos)
		}
		if c == 0 && moved {
			continue // (the event ends where the subscriber starts)
		}
		if rows != nil && s.wants(rows) {
			if !decoded {
				decoded, rowsErr = true, f.decodeRows(ev, rows)
			}
			if rowsErr != nil {
				s.s.Broken(fmt.Errorf("decode a rows event of %s.%s: %w", rows.Table.Schema, rows.Table.Table, rowsErr))
				f.end(s)
				continue
			}
		}
		if err := s.s.Event(ev, f.at); err != nil {
			s.s.Broken(err)
			f.end(s)
			continue
		}
		s.pos = f.at
	}
}

func (s *Subscription) wants(e *replication.RowsEvent) bool {
	if e.Table == nil {
		return false
	}
	for _, t := range s.s.RowsOf {
		if string(e.Table.Schema) == t.Schema && string(e.Table.Table) == t.Name {
			return true
		}
	}
	return false
}

// decodeRows decodes e's row images from ev's bytes: the parser decoded
// its header only.
func (f *Follower) decodeRows(ev *replication.BinlogEvent, e *replication.RowsEvent) error {
	body := ev.RawData[replication.EventHeaderSize:]
	if f.crc {
		body = body[:len(body)-replication.BinlogChecksumLength]
	}
	pos, err := e.DecodeHeader(body)
	if err != nil {
		return err
	}
	return e.DecodeData(pos, body)
}

// broke tells the subscribers a break (at f.at) reached that the stream
// broke: those it was serving or starting, not those ahead of where it
// broke (the stream was started again for an older position; they have
// missed nothing, and it starts again where they are). Those that resume
// follow again from the log's end. told says whether one that resumes was
// told: the next attempt then waits.
func (f *Follower) broke(err error) (told bool) {
	for _, s := range f.live {
		if s.resolved && s.pos.Compare(f.at) > 0 {
			continue
		}
		s.s.Broken(err)
		if !s.s.Resume {
			f.end(s)
			continue
		}
		told = true
		s.resolved, s.started, s.pos = false, false, mysql.Position{}
	}
	f.prune()
	return told
}
