package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/binlog"
	"tableproxy/plugins"
)

// stream follows the backend's binary log from the job's starting position
// and keeps the set of keys of the table that changed since: dirty keys.
// It never applies anything itself. Catch-up copies dirty keys again from
// the table (see applier), so the order and number of changes to a key do
// not matter, only that every change after the starting position marks it.
//
// Anything that could make the set incomplete ends the stream with an
// error, and the job fails: a break in the log, DDL on the table, a row
// image without the key.
type stream struct {
	t   *tableInfo
	sub *binlog.Subscription

	mu      sync.Mutex // guards the fields below; held briefly by the reader and by catch-up
	dirty   map[string][]string
	pos     mysql.Position // end of the last event read
	err     error
	closing bool // the job is renaming the table: its DDL events are expected
	started bool // the stream reached the job's position: the backend accepted it
	changed chan struct{}

	events int64 // row changes seen for the table
}

// startStream starts following the log at from, as a subscriber of the
// proxy's follower that wants the table's row images (the shadow's own
// copy, among other tables, comes undecoded). A break of the stream ends
// the subscription: changes may have been missed.
func startStream(f *binlog.Follower, user string, t *tableInfo, from mysql.Position) *stream {
	s := &stream{t: t, dirty: map[string][]string{}, pos: from, changed: make(chan struct{})}
	s.sub = f.Subscribe(binlog.Subscriber{From: from, User: user, RowsOf: []binlog.Table{{Schema: t.Schema, Name: t.Table}},
		Started: s.start, Event: s.handle, Broken: s.fail})
	return s
}

func (s *stream) start(at mysql.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started, s.pos = true, at
	s.signalLocked()
}

// close stops the stream.
func (s *stream) close() { s.sub.Close() }

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && !s.closing {
		s.err = fmt.Errorf("binary log stream: %w", err)
	}
	s.signalLocked()
}

func (s *stream) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *stream) handle(ev *replication.BinlogEvent, at mysql.Position) error {
	var keys [][]string
	switch e := ev.Event.(type) {
	case *replication.RowsEvent:
		if e.Table != nil && string(e.Table.Schema) == s.t.Schema && string(e.Table.Table) == s.t.Table {
			var err error
			if keys, err = s.rowKeys(e); err != nil {
				return err
			}
		}
	case *replication.QueryEvent:
		if err := s.checkQuery(string(e.Schema), string(e.Query)); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.dirty[keyID(k)] = k
	}
	s.events += int64(len(keys))
	s.pos = at
	s.signalLocked()
	return nil
}

// rowKeys renders the key of every row image in e: for an update, both the
// before and the after image, so a change of key marks both.
func (s *stream) rowKeys(e *replication.RowsEvent) ([][]string, error) {
	keys := make([][]string, 0, len(e.Rows))
	for _, row := range e.Rows {
		k := make([]string, len(s.t.Key))
		for i, c := range s.t.Key {
			if c.Ordinal >= len(row) {
				return nil, fmt.Errorf("row image of %s has %d columns, key column %s is #%d", s.t.name(), len(row), c.Name, c.Ordinal+1)
			}
			if row[c.Ordinal] == nil {
				return nil, fmt.Errorf("row image of %s lacks key column %s (binlog_row_image must be FULL)", s.t.name(), c.Name)
			}
			lit, err := c.binlogLiteral(row[c.Ordinal])
			if err != nil {
				return nil, err
			}
			k[i] = lit
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// checkQuery fails the stream on DDL that names the table: the copy would
// no longer match it. (TRUNCATE, for one, changes rows without row events.)
func (s *stream) checkQuery(schema, q string) error {
	if strings.EqualFold(q, "BEGIN") || strings.EqualFold(q, "COMMIT") {
		return nil
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil
	}
	a, _ := plugins.Analyze(q, schema)
	if a.Unparsed {
		if containsFold(q, s.t.Table) {
			return fmt.Errorf("statement on %s during the job that cannot be analysed: %.200s", s.t.name(), q)
		}
		return nil
	}
	for _, tk := range a.Named {
		if tk.Schema == s.t.Schema && tk.Table == s.t.Table {
			return fmt.Errorf("%s was changed by a statement during the job: %.200s", s.t.name(), q)
		}
	}
	return nil
}

// keyID is a key's rendered literals as one map key.
func keyID(k []string) string { return strings.Join(k, "\x00") }

// take removes and returns every dirty key.
func (s *stream) take() ([][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	keys := make([][]string, 0, len(s.dirty))
	for _, k := range s.dirty {
		keys = append(keys, k)
	}
	clear(s.dirty)
	return keys, nil
}

// pending is how many dirty keys wait.
func (s *stream) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirty)
}

// setClosing tells the stream whether the job is renaming the table, so
// that its own RENAME does not fail the stream.
func (s *stream) setClosing(on bool) {
	s.mu.Lock()
	s.closing = on
	s.mu.Unlock()
}

// failed returns the error that ended the stream, if any.
func (s *stream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// errBehind is the stream not keeping up with the log in time.
var errBehind = errors.New("the binary log stream is behind")

// streamWait is how long the stream may take to reach the log's end
// outside the cut-over.
const streamWait = 30 * time.Second

// waitFor returns once the stream has read the log up to target.
func (s *stream) waitFor(ctx context.Context, target mysql.Position, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		err, reached, ch, at := s.err, s.started && s.pos.Compare(target) >= 0, s.changed, s.pos
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if reached {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w: it did not reach %s within %s (at %s)", errBehind, target, timeout, at)
		}
	}
}

// startBinlog starts following the binary log before the backfill reads a
// single row, from a position P0 taken while the table is briefly
// read-locked. The lock makes P0 a clean cut: every transaction that wrote
// the table and was logged before P0 has also committed in the engine (a
// transaction holds its table's metadata lock until then), so every chunk
// the backfill reads sees it; every one logged after P0 reaches the
// stream. Without it, a transaction logged just before P0 but not yet
// visible could be missed by both.
func (r *runner) startBinlog(ctx context.Context) error {
	// As the proxy's binary-log user, or when it has none, the job's.
	user := r.p.binlog.User(r.user)
	if r.cp.started() {
		// A resumed job follows the log from where it first did: P0 was a
		// clean cut then, and every change since is in the log.
		var err error
		if r.logConn, err = r.p.backend.Connect(ctx, user, ""); err != nil {
			return err
		}
		r.stream = startStream(r.p.binlog, user, r.t, r.cp.position())
		return r.stream.waitFor(ctx, r.cp.position(), 10*time.Second)
	}
	l, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := r.lockTables(ctx, l, r.t.name()+" READ", lockAttempts, r.lockWait()); err != nil {
		return err
	}
	defer l.Execute("UNLOCK TABLES")
	if r.logConn, err = r.p.backend.Connect(ctx, user, ""); err != nil {
		return err
	}
	from, err := r.binlogEnd()
	if err != nil {
		return err
	}
	if err := binlogFiltered(r.logConn, r.t.Schema); err != nil {
		return err
	}
	r.stream = startStream(r.p.binlog, user, r.t, from)
	// Wait until the stream runs, so a refused login fails the job here.
	if err := r.stream.waitFor(ctx, from, 10*time.Second); err != nil {
		return err
	}
	r.cp.BinlogFile, r.cp.BinlogPos = from.Name, from.Pos
	if err := r.saveCheckpoint(); err != nil {
		return err
	}
	return r.stall(ctx, StageBinlog)
}

// requeue marks keys dirty again.
func (s *stream) requeue(keys [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.dirty[keyID(k)] = k
	}
}

// binlogEnd is where the binary log ends now, read as the binary-log user
// (SHOW MASTER STATUS needs REPLICATION CLIENT, which the job's user may
// lack). The verify's workers may ask at once: they take turns on the
// connection.
func (r *runner) binlogEnd() (mysql.Position, error) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return binlog.End(r.logConn)
}

// readToEnd returns once the stream has read the binary log up to where
// it ends now, or an error after timeout.
func (r *runner) readToEnd(ctx context.Context, timeout time.Duration) error {
	target, err := r.binlogEnd()
	if err != nil {
		return err
	}
	return r.stream.waitFor(ctx, target, timeout)
}

// binlogFiltered refuses a schema the backend leaves out of its binary log
// (binlog_do_db / binlog_ignore_db): the job would not see its changes.
func binlogFiltered(c *client.Conn, schema string) error {
	st, err := binlog.ReadStatus(c)
	if err != nil {
		return err
	}
	doDB, ignoreDB := st.DoDB, st.IgnoreDB
	listed := func(list string) bool {
		for _, db := range strings.Split(list, ",") {
			if strings.TrimSpace(db) == schema {
				return true
			}
		}
		return false
	}
	if (doDB != "" && !listed(doDB)) || listed(ignoreDB) {
		return mysql.NewError(mysql.ER_OPTION_PREVENTS_STATEMENT, fmt.Sprintf(
			"tableproxy cannot add an index online: the backend's binary log leaves out schema %s (binlog_do_db=%q, binlog_ignore_db=%q)", schema, doDB, ignoreDB))
	}
	return nil
}
