package plugins

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

const (
	defaultSlowThreshold = 200 * time.Millisecond
	defaultMaxLength     = 2048
	defaultRateLimit     = 100
	queryLogFlushEvery   = time.Second
)

type queryLogOptions struct {
	// Threshold is the duration from which a statement is logged; "0s" logs
	// every statement.
	Threshold *Duration `json:"threshold"`
	// File is where JSON lines are appended; empty logs through the
	// proxy's logger.
	File string `json:"file"`
	// Literals logs the statement as sent instead of its normalized form.
	// Off by default: literals carry passwords and personal data.
	Literals bool `json:"literals"`
	// MaxLength truncates the logged statement to this many characters; 0
	// keeps it whole.
	MaxLength *int `json:"max_length"`
	// RateLimit caps lines per second; 0 removes the cap. Lines over the cap
	// are counted and the count is logged instead.
	RateLimit *int `json:"rate_limit"`
}

// queryLog is the slow-query log. Statements faster than the threshold cost
// one comparison; slower ones are rate limited before anything is computed
// for them, so a flood of slow statements costs neither digests nor I/O.
type queryLog struct {
	threshold time.Duration
	literals  bool
	maxLen    int
	limit     int
	logger    *slog.Logger // used when there is no file
	now       func() time.Time

	// mu guards the rate limiter and the file. It is taken by sessions
	// logging a slow statement, by the flusher once a second and by Close.
	mu          sync.Mutex
	file        *os.File
	w           *bufio.Writer
	closed      bool
	failing     bool // the last flush failed
	windowStart time.Time
	inWindow    int
	suppressed  uint64    // lines dropped since the last report
	since       time.Time // when the first of them was dropped

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newQueryLog(opts Options, env Env) (Plugin, error) {
	q, err := newQueryLogPlugin(opts, env, time.Now)
	if err != nil {
		return nil, err
	}
	q.startFlusher(queryLogFlushEvery)
	return q, nil
}

// newQueryLogPlugin builds the plugin without its background flusher, with
// the given clock.
func newQueryLogPlugin(opts Options, env Env, now func() time.Time) (*queryLog, error) {
	var o queryLogOptions
	if err := DecodeOptions(opts, &o); err != nil {
		return nil, err
	}
	q := &queryLog{
		threshold: defaultSlowThreshold,
		literals:  o.Literals,
		maxLen:    defaultMaxLength,
		limit:     defaultRateLimit,
		logger:    env.Logger,
		now:       now,
	}
	if o.Threshold != nil {
		if *o.Threshold < 0 {
			return nil, fmt.Errorf("threshold: %v is negative", time.Duration(*o.Threshold))
		}
		q.threshold = time.Duration(*o.Threshold)
	}
	if o.MaxLength != nil {
		if *o.MaxLength < 0 {
			return nil, fmt.Errorf("max_length: %d is negative (0 means no limit)", *o.MaxLength)
		}
		q.maxLen = *o.MaxLength
	}
	if o.RateLimit != nil {
		if *o.RateLimit < 0 {
			return nil, fmt.Errorf("rate_limit: %d is negative (0 means no limit)", *o.RateLimit)
		}
		q.limit = *o.RateLimit
	}
	if q.logger == nil {
		q.logger = slog.Default()
	}
	if o.File != "" {
		// Owner-only: even normalized statements name tables and columns,
		// and with literals on the file holds whatever clients sent.
		f, err := os.OpenFile(o.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("file: %w", err)
		}
		q.file = f
		q.w = bufio.NewWriterSize(f, 32<<10)
	}
	return q, nil
}

// startFlusher starts the goroutine that writes buffered lines out and
// reports suppressed lines even when no further slow statement comes.
func (q *queryLog) startFlusher(every time.Duration) {
	q.stop = make(chan struct{})
	q.done = make(chan struct{})
	go func() {
		defer close(q.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-q.stop:
				return
			case <-t.C:
				q.tick()
			}
		}
	}()
}

func (q *queryLog) Name() string { return "querylog" }

// OnResult logs st if it took at least the threshold.
func (q *queryLog) OnResult(st *Statement, out *Outcome) {
	if out.Duration < q.threshold {
		return
	}
	now := q.now()
	q.mu.Lock()
	ok, n, since := q.admitLocked(now)
	q.mu.Unlock()
	if n > 0 {
		q.reportSuppressed(now, n, since)
	}
	if ok {
		q.emit(q.record(st, out, now))
	}
}

// admitLocked applies the rate limit: at most limit lines in a one-second
// window, counting the rest. When it opens a new window it returns the count
// suppressed in the previous one, to be reported.
func (q *queryLog) admitLocked(now time.Time) (ok bool, n uint64, since time.Time) {
	if q.limit == 0 {
		return true, 0, time.Time{}
	}
	if now.Sub(q.windowStart) >= time.Second || now.Before(q.windowStart) {
		n, since = q.takeSuppressedLocked()
		q.windowStart = now
		q.inWindow = 0
	}
	if q.inWindow < q.limit {
		q.inWindow++
		return true, n, since
	}
	if q.suppressed == 0 {
		q.since = now
	}
	q.suppressed++
	return false, n, since
}

func (q *queryLog) takeSuppressedLocked() (uint64, time.Time) {
	n, since := q.suppressed, q.since
	q.suppressed = 0
	return n, since
}

// tick flushes the file and reports lines suppressed in a window that has
// ended, rather than with the next slow statement, which may be hours away.
// The flusher calls it once a second.
func (q *queryLog) tick() {
	now := q.now()
	var n uint64
	var since time.Time
	q.mu.Lock()
	if q.suppressed > 0 && now.Sub(q.windowStart) >= time.Second {
		n, since = q.takeSuppressedLocked()
	}
	q.mu.Unlock()
	if n > 0 {
		q.reportSuppressed(now, n, since)
	}
	q.mu.Lock()
	var err error
	if q.w != nil && !q.closed {
		if err = q.w.Flush(); err != nil {
			// bufio keeps failing once a write failed: drop what is
			// buffered and try afresh next time (the disk may have room
			// again). Say so once per run of failures.
			q.w.Reset(q.file)
		}
	}
	failing := q.failing
	q.failing = err != nil
	q.mu.Unlock()
	if err != nil && !failing {
		q.logger.Warn("slow query log: writing the file failed; lines are being lost", "file", q.file.Name(), "err", err)
	}
}

// Close stops the flusher, reports what is still suppressed, and flushes and
// closes the file.
func (q *queryLog) Close() error {
	q.stopOnce.Do(func() {
		if q.stop != nil {
			close(q.stop)
			<-q.done
		}
	})
	now := q.now()
	q.mu.Lock()
	n, since := q.takeSuppressedLocked()
	q.mu.Unlock()
	if n > 0 {
		q.reportSuppressed(now, n, since)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	if q.file == nil {
		return nil
	}
	return errors.Join(q.w.Flush(), q.file.Close())
}

// slowQuery is one line of the log.
type slowQuery struct {
	Time         time.Time `json:"time"`
	Msg          string    `json:"msg"`
	ConnID       uint32    `json:"conn_id"`
	User         string    `json:"user"`
	DB           string    `json:"db"`
	Command      string    `json:"command"`
	Kind         string    `json:"kind"`
	DurationMS   float64   `json:"duration_ms"`
	Rows         uint64    `json:"rows"`
	AffectedRows uint64    `json:"affected_rows"`
	Source       string    `json:"source"`
	Plugin       string    `json:"plugin,omitempty"`
	ErrorCode    uint16    `json:"error_code,omitempty"`
	ErrorState   string    `json:"error_state,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Digest       string    `json:"digest"`
	Statement    string    `json:"statement"`
	Truncated    bool      `json:"truncated,omitempty"`
}

func (q *queryLog) record(st *Statement, out *Outcome, now time.Time) *slowQuery {
	text := st.SQL
	if !q.literals {
		text = st.Normalized()
	}
	text, truncated := truncateRunes(text, q.maxLen)
	r := &slowQuery{
		Time:         now,
		Msg:          "slow query",
		ConnID:       st.ConnID,
		User:         st.User,
		DB:           st.DB,
		Command:      st.Command.String(),
		Kind:         st.Kind.String(),
		DurationMS:   float64(out.Duration) / float64(time.Millisecond),
		Rows:         out.Rows,
		AffectedRows: out.AffectedRows,
		Source:       out.Source.String(),
		Plugin:       out.Plugin,
		Digest:       st.Digest(),
		Statement:    text,
		Truncated:    truncated,
	}
	if e := out.Err; e != nil {
		r.ErrorCode = e.Code
		r.ErrorState = e.State
		r.ErrorMessage = e.Message
		if !q.literals && out.Source == FromBackend {
			r.ErrorMessage = redactQuoted(e.Message)
		}
	}
	return r
}

func (q *queryLog) emit(r *slowQuery) {
	if q.file == nil {
		attrs := []slog.Attr{
			slog.Uint64("conn_id", uint64(r.ConnID)),
			slog.String("user", r.User),
			slog.String("db", r.DB),
			slog.String("command", r.Command),
			slog.String("kind", r.Kind),
			slog.Float64("duration_ms", r.DurationMS),
			slog.Uint64("rows", r.Rows),
			slog.Uint64("affected_rows", r.AffectedRows),
			slog.String("source", r.Source),
		}
		if r.Plugin != "" {
			attrs = append(attrs, slog.String("plugin", r.Plugin))
		}
		if r.ErrorCode != 0 {
			attrs = append(attrs,
				slog.Int("error_code", int(r.ErrorCode)),
				slog.String("error_state", r.ErrorState),
				slog.String("error_message", strings.Clone(r.ErrorMessage)))
		}
		// The statement may alias the session's packet buffer: a handler
		// that keeps records (an async or buffering one) needs its own copy.
		attrs = append(attrs, slog.String("digest", r.Digest), slog.String("statement", strings.Clone(r.Statement)))
		if r.Truncated {
			attrs = append(attrs, slog.Bool("truncated", true))
		}
		q.logger.LogAttrs(context.Background(), slog.LevelInfo, r.Msg, attrs...)
		return
	}
	line, err := json.Marshal(r)
	if err != nil {
		return // cannot happen: every field is a string, number or time
	}
	q.writeLine(line)
}

func (q *queryLog) reportSuppressed(now time.Time, n uint64, since time.Time) {
	const msg = "slow query lines suppressed by rate_limit"
	if q.file == nil {
		q.logger.LogAttrs(context.Background(), slog.LevelWarn, msg,
			slog.Uint64("suppressed", n),
			slog.Time("since", since),
			slog.Int("rate_limit", q.limit))
		return
	}
	line, err := json.Marshal(struct {
		Time       time.Time `json:"time"`
		Msg        string    `json:"msg"`
		Suppressed uint64    `json:"suppressed"`
		Since      time.Time `json:"since"`
		RateLimit  int       `json:"rate_limit"`
	}{now, msg, n, since, q.limit})
	if err != nil {
		return
	}
	q.writeLine(line)
}

func (q *queryLog) writeLine(line []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	// A write error (disk full) is not the client's problem; the statement
	// has already been answered. bufio keeps the error and Close returns it.
	q.w.Write(line)
	q.w.WriteByte('\n')
}

// truncateRunes cuts s to at most max characters (not bytes, so a
// multi-byte character is never split); max 0 means no limit.
func truncateRunes(s string, max int) (string, bool) {
	if max == 0 || len(s) <= max {
		return s, false
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i], true
		}
		n++
	}
	return s, false
}

// redactQuoted replaces everything from the first to the last single quote
// of a backend error message with '?'. MySQL quotes user data in its
// messages (Duplicate entry 'x', Incorrect integer value: 'x') and a syntax
// error repeats the statement text after near '...', so without redaction a
// literal kept out of the statement field would come back in the error.
func redactQuoted(msg string) string {
	i := strings.IndexByte(msg, '\'')
	if i < 0 {
		return msg
	}
	j := strings.LastIndexByte(msg, '\'')
	if j == i {
		return msg[:i] + "'?'"
	}
	return msg[:i] + "'?'" + msg[j+1:]
}
