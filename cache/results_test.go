package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"

	"tableproxy/cache/eval"
	"tableproxy/cache/results"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// response encodes a result set as the relay records it: column count,
// definitions, EOF, rows, EOF.
func response(cols int, rows []string, midWarn, endWarn, midStatus, endStatus uint16) ([]byte, []int) {
	var data []byte
	var ends []int
	add := func(p []byte) {
		data = append(data, p...)
		ends = append(ends, len(data))
	}
	add(mysql.AppendLengthEncodedInteger(nil, uint64(cols)))
	for i := 0; i < cols; i++ {
		add(fmt.Appendf(nil, "\x03def\x00\x00\x00\x02c%d\x00\x0c\x21\x00\x10\x00\x00\x00\xfd\x00\x00\x00\x00\x00", i))
	}
	eof := func(w, s uint16) []byte {
		return []byte{0xfe, byte(w), byte(w >> 8), byte(s), byte(s >> 8)}
	}
	add(eof(midWarn, midStatus))
	for _, r := range rows {
		add(mysql.AppendLengthEncodedInteger(nil, uint64(len(r))))
		data = append(data, r...)
		ends[len(ends)-1] = len(data)
	}
	add(eof(endWarn, endStatus))
	return data, ends
}

// recorder is a ResponseWriter that keeps what is written.
type recorder struct {
	status  uint16
	packets [][]byte
	rows    uint64
}

func (r *recorder) WriteResult(*mysql.Result) error { return fmt.Errorf("unexpected WriteResult") }
func (r *recorder) WriteError(*mysql.MyError) error { return fmt.Errorf("unexpected WriteError") }
func (r *recorder) WritePacket(p []byte) error {
	r.packets = append(r.packets, bytes.Clone(p))
	return nil
}
func (r *recorder) SetStatus(s uint16)                  { r.status = s }
func (r *recorder) Status() uint16                      { return r.status }
func (r *recorder) Rows(n uint64)                       { r.rows = n }
func (r *recorder) ExtendedMetadata() bool              { return false }
func (r *recorder) eof(i int) (warnings, status uint16) { return eofFields(r.packets[i]) }

func eofFields(p []byte) (warnings, status uint16) {
	return binary.LittleEndian.Uint16(p[1:]), binary.LittleEndian.Uint16(p[3:])
}

func TestResultEntryChecksTheResponse(t *testing.T) {
	const inTx = mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT
	const noIndex = mysql.SERVER_STATUS_NO_INDEX_USED
	for _, tc := range []struct {
		name string
		edit func(c *plugins.Capture)
		ok   bool
	}{
		{"one result set", func(c *plugins.Capture) {}, true},
		{"no rows", func(c *plugins.Capture) { c.Data, c.Ends = response(2, nil, 0, 0, 2, 2) }, true},
		{"warnings", func(c *plugins.Capture) { c.Data, c.Ends = response(2, []string{"a", "b"}, 0, 1, 2, 2) }, false},
		{"warnings after the columns", func(c *plugins.Capture) { c.Data, c.Ends = response(2, []string{"a", "b"}, 1, 0, 2, 2) }, false},
		{"more results", func(c *plugins.Capture) {
			c.Data, c.Ends = response(2, []string{"a", "b"}, 0, 0, 2, 2|mysql.SERVER_MORE_RESULTS_EXISTS)
		}, false},
		{"a cursor", func(c *plugins.Capture) {
			c.Data, c.Ends = response(2, nil, 0, 0, 2|mysql.SERVER_STATUS_CURSOR_EXISTS, 2)
			c.Ends = c.Ends[:len(c.Ends)-1]
			c.Data = c.Data[:c.Ends[len(c.Ends)-1]]
		}, false},
		{"an OK packet", func(c *plugins.Capture) { c.Data, c.Ends = []byte{0, 0, 0, 2, 0, 0, 0}, []int{7} }, false},
		{"an ERR row", func(c *plugins.Capture) {
			c.Data, c.Ends = response(2, []string{"a", "b"}, 0, 0, 2, 2)
			c.Data[c.Ends[3]] = 0xff // the first row
		}, false},
		{"truncated", func(c *plugins.Capture) { c.Data, c.Ends, c.Truncated = nil, nil, true }, false},
		{"cut short", func(c *plugins.Capture) { c.Ends = c.Ends[:4]; c.Data = c.Data[:c.Ends[3]] }, false},
	} {
		c := &plugins.Capture{Results: 1}
		c.Data, c.Ends = response(2, []string{"a", "b"}, 0, 0, inTx|noIndex, inTx)
		tc.edit(c)
		e, ok := results.NewEntry("k", c)
		if ok != tc.ok {
			t.Errorf("%s: stored %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if !ok || tc.name != "one result set" {
			continue
		}
		// Replayed to a session in autocommit mode outside a transaction:
		// its status, with the backend's index-use bit.
		w := &recorder{status: mysql.SERVER_STATUS_AUTOCOMMIT}
		if err := e.Replay(w); err != nil {
			t.Fatal(err)
		}
		if len(w.packets) != len(c.Ends) || w.rows != 2 {
			t.Fatalf("replayed %d packets, %d rows", len(w.packets), w.rows)
		}
		if _, s := w.eof(3); s != mysql.SERVER_STATUS_AUTOCOMMIT|noIndex {
			t.Errorf("EOF after the columns: status %#x", s)
		}
		if _, s := w.eof(6); s != mysql.SERVER_STATUS_AUTOCOMMIT {
			t.Errorf("final EOF: status %#x", s)
		}
		for _, i := range []int{0, 1, 2, 4, 5} {
			start := 0
			if i > 0 {
				start = c.Ends[i-1]
			}
			if !bytes.Equal(w.packets[i], c.Data[start:c.Ends[i]]) {
				t.Errorf("packet %d replayed as % x", i, w.packets[i])
			}
		}
	}
}

// fakeSession answers the settings probes, and is the proxy's account of
// the session's transaction (autocommit and the isolation level as set).
type fakeSession struct {
	autocommit string
	sqlMode    string
	isolation  string
	timeZone   string
	autoNull   string
	queries    int
	limits     string // the account's resource limits, as SHOW CREATE USER ends
}

func (f *fakeSession) Query(q string) (*mysql.Result, error) {
	f.queries++
	var row []string
	switch {
	case q == settingsQuery:
		row = []string{"utf8mb4", f.sqlMode, "utf8mb4", "utf8mb4", "1024", "SYSTEM", "UTC", "4"}
	case q == "SHOW CREATE USER CURRENT_USER()":
		row = []string{"CREATE USER `app`@`%` IDENTIFIED BY PASSWORD '*0'" + f.limits}
	case q == results.SettingsQuery:
		for range strings.Count(q, "@@") {
			row = append(row, "x")
		}
		row[0], row[4] = f.autoNull, f.timeZone
	default:
		return nil, fmt.Errorf("unexpected query %q", q)
	}
	rs := mysql.NewResultset(len(row))
	vals := make([]mysql.FieldValue, len(row))
	for i, v := range row {
		rs.Fields[i] = &mysql.Field{Name: fmt.Appendf(nil, "v%d", i), Type: mysql.MYSQL_TYPE_VAR_STRING}
		vals[i] = mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(v))
	}
	rs.Values = [][]mysql.FieldValue{vals}
	return mysql.NewResult(rs), nil
}

func (f *fakeSession) Seq() uint64                   { return 0 }
func (f *fakeSession) Opaque() bool                  { return false }
func (f *fakeSession) Since() uint64                 { return 0 }
func (f *fakeSession) Autocommit() bool              { return f.autocommit == "1" }
func (f *fakeSession) Isolation() string             { return f.isolation }
func (f *fakeSession) NextTxPending() bool           { return false }
func (f *fakeSession) PlainCompletion() (bool, bool) { return true, true }
func (f *fakeSession) TableLocks() bool              { return false }

// resultsFixture is a cache plugin with one cached, loaded table and a
// result cache, without a loader or a backend.
type resultsFixture struct {
	p    *Plugin
	id   lease.TableID
	ts   *tableState
	sess *fakeSession
	st   plugins.Statement
}

func newResultsFixture(t *testing.T) *resultsFixture {
	t.Helper()
	rc, err := results.NewCache(1<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Store.Close)
	p := &Plugin{log: slog.Default(), leases: newMemLeases(), maxPlannedText: 64 << 10,
		held: map[uint32][]heldWrite{}, opts: Options{AcceptStaleRisk: true}, results: rc}
	f := &resultsFixture{p: p, id: lease.TableID{Schema: "shop", Table: "rates"},
		sess: &fakeSession{autocommit: "1", sqlMode: "STRICT_TRANS_TABLES", isolation: "REPEATABLE-READ", timeZone: "SYSTEM", autoNull: "0"}}
	f.cache()
	f.st = plugins.Statement{ConnID: 7, User: "app", DB: "shop", Session: &plugins.SessionState{}, Backend: f.sess, Tx: f.sess}
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	return f
}

// cache caches the table (again), loaded at its current version.
func (f *resultsFixture) cache() {
	p := f.p
	ts := &tableState{entry: Entry{Schema: f.id.Schema, Table: f.id.Table}, lease: p.leases.Table(f.id), gen: p.gens.Add(1)}
	p.mu.Lock()
	p.changeTables(func(m map[lease.TableID]*tableState) { m[f.id] = ts })
	p.mu.Unlock()
	f.ts = ts
	f.reload()
}

// reload loads the table at its current version.
func (f *resultsFixture) reload() {
	f.ts.snap.Store(&eval.Snapshot{ID: f.id, Version: f.ts.lease.Version(),
		Fields: []*mysql.Field{{Name: []byte("code"), Type: mysql.MYSQL_TYPE_VAR_STRING}}})
}

// run offers the fixture's statement to the result cache as the evaluator
// does when it declines it, and when the statement goes on to the backend
// (with a capture), plays the backend's answer, with between() run while
// the statement is "at the backend". It reports whether it was a hit.
func (f *resultsFixture) run(t *testing.T, answer []string, between func()) (hit, recorded bool, w *recorder) {
	t.Helper()
	si := session(&f.st)
	a := f.p.declined(&f.st, si, &results.Shape{Tables: []lease.TableID{f.id}}, []lease.TableID{f.id})
	out := &plugins.Outcome{Source: plugins.FromBackend, Status: mysql.SERVER_STATUS_AUTOCOMMIT}
	switch a.Verdict {
	case plugins.Answer:
		w = &recorder{status: mysql.SERVER_STATUS_AUTOCOMMIT}
		if err := a.Responder.Respond(w); err != nil {
			t.Fatal(err)
		}
		out.Source = plugins.FromPlugin
		hit = true
	case plugins.Pass:
		if c := a.Capture; c != nil {
			if !c.Full || c.MaxBytes <= 0 {
				t.Fatalf("capture %+v", c)
			}
			recorded = true
			c.Data, c.Ends = response(1, answer, 0, 0, 2, 2)
			c.Results = 1
		}
	default:
		t.Fatalf("verdict %v", a.Verdict)
	}
	if between != nil {
		between()
	}
	f.p.OnResult(&f.st, out)
	f.p.results.Store.Wait()
	return hit, recorded, w
}

// An account with MAX_QUERIES_PER_HOUR is never answered from the result
// cache (the backend would not count the read); one with a limit of 0 is.
func TestResultCacheSkipsQueryLimitedAccounts(t *testing.T) {
	f := newResultsFixture(t)
	f.sess.limits = " WITH MAX_QUERIES_PER_HOUR 0 MAX_UPDATES_PER_HOUR 3"
	want := []string{"EUR", "USD"}
	f.run(t, want, nil)
	if hit, _, _ := f.run(t, nil, nil); !hit {
		t.Fatal("an account with no query limit was not answered from the result cache")
	}
	g := newResultsFixture(t)
	g.sess.limits = " WITH MAX_QUERIES_PER_HOUR 10"
	g.run(t, want, nil)
	if hit, _, _ := g.run(t, want, nil); hit {
		t.Fatal("an account with MAX_QUERIES_PER_HOUR 10 was answered from the result cache")
	}
}

func TestResultCacheHitsAndGuards(t *testing.T) {
	f := newResultsFixture(t)
	rc := f.p.results
	want := []string{"EUR", "USD"}

	if hit, rec, _ := f.run(t, want, nil); hit || !rec {
		t.Fatalf("first run: hit %v, recorded %v", hit, rec)
	}
	hit, _, w := f.run(t, nil, nil)
	if !hit {
		t.Fatal("second run was not answered from the result cache")
	}
	if w.rows != 2 || string(w.packets[3][1:]) != "EUR" || string(w.packets[4][1:]) != "USD" {
		t.Errorf("replayed %d rows: %q", w.rows, w.packets)
	}
	if f.ts.hits.Load() != 1 || f.ts.resultHits.Load() != 1 || f.ts.passes.Load() != 1 {
		t.Errorf("hits %d, result hits %d, passes %d", f.ts.hits.Load(), f.ts.resultHits.Load(), f.ts.passes.Load())
	}

	// A write in flight: not servable, so not even looked up.
	in, _ := f.p.leases.BeginWrite(context.Background(), f.id)
	if hit, rec, _ := f.run(t, want, nil); hit || rec {
		t.Errorf("during a write: hit %v, recorded %v", hit, rec)
	}
	in.End()
	f.reload()
	// After it, the old answer no longer matches.
	if hit, rec, _ := f.run(t, []string{"EUR"}, nil); hit || !rec {
		t.Errorf("after a write: hit %v, recorded %v", hit, rec)
	}
	if hit, _, w := f.run(t, nil, nil); !hit || w.rows != 1 {
		t.Errorf("after a write, again: hit %v", hit)
	}

	// A write that begins and ends while the statement is at the backend:
	// the answer may predate it, so it is not stored.
	f.st.Reset(plugins.ComQuery, "SELECT LOWER(code) FROM rates")
	stores, rejects := rc.Stores.Load(), rc.Rejects.Load()
	_, rec, _ := f.run(t, want, func() {
		in, _ := f.p.leases.BeginWrite(context.Background(), f.id)
		in.End()
	})
	if !rec || rc.Stores.Load() != stores || rc.Rejects.Load() != rejects+1 {
		t.Errorf("a write during the statement: recorded %v, stores %d->%d, rejects %d->%d", rec, stores, rc.Stores.Load(), rejects, rc.Rejects.Load())
	}
	f.reload()
	// One that is still open when the answer arrives: the same.
	var open *lease.Intent
	f.run(t, want, func() { open, _ = f.p.leases.BeginWrite(context.Background(), f.id) })
	open.End()
	f.reload()
	if rc.Stores.Load() != stores {
		t.Errorf("an answer read while the table was written was stored")
	}
	if hit, _, _ := f.run(t, want, nil); hit {
		t.Error("an answer read while the table was written was served")
	}

	// A table cached again after NOCACHE keeps its version (writes were not
	// followed meanwhile): its old answers must not be served.
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	f.run(t, want, nil)
	if hit, _, _ := f.run(t, nil, nil); !hit {
		t.Fatal("not a hit before NOCACHE")
	}
	f.cache()
	if hit, _, _ := f.run(t, want, nil); hit {
		t.Error("an answer from before NOCACHE was served after CACHE")
	}
}

func TestResultCacheKey(t *testing.T) {
	f := newResultsFixture(t)
	if _, rec, _ := f.run(t, []string{"EUR"}, nil); !rec {
		t.Fatal("not recorded")
	}
	hitWith := func(name string, change, undo func()) {
		t.Helper()
		change()
		if hit, _, _ := f.run(t, []string{"x"}, nil); hit {
			t.Errorf("%s: served another key's answer", name)
		}
		undo()
		if hit, _, _ := f.run(t, nil, nil); !hit {
			t.Errorf("%s: not a hit once undone", name)
		}
	}
	si := session(&f.st)
	hitWith("another user", func() { f.st.User = "other" }, func() { f.st.User = "app" })
	hitWith("another database", func() { f.st.DB = "x" }, func() { f.st.DB = "shop" })
	hitWith("other text", func() { f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates ") },
		func() { f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates") })
	hitWith("extended metadata", func() { f.st.ExtendedMetadata = true }, func() { f.st.ExtendedMetadata = false })
	hitWith("another time zone", func() { f.sess.timeZone = "+01:00"; si.rc.Known = false },
		func() { f.sess.timeZone = "SYSTEM"; si.rc.Known = false })

	// SET makes the settings be read again.
	q := f.sess.queries
	f.st.Reset(plugins.ComQuery, "SET time_zone = '+02:00'")
	f.p.OnResult(&f.st, &plugins.Outcome{})
	f.sess.timeZone = "+02:00"
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	if hit, _, _ := f.run(t, []string{"x"}, nil); hit || f.sess.queries == q {
		t.Errorf("after SET: hit %v, settings read again %v", hit, f.sess.queries != q)
	}
	// So does a request of several statements.
	q = f.sess.queries
	f.st.Reset(plugins.ComQuery, "SELECT 1; SET time_zone = 'SYSTEM'")
	f.p.OnResult(&f.st, &plugins.Outcome{})
	f.sess.timeZone = "SYSTEM"
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	if hit, _, _ := f.run(t, nil, nil); !hit || f.sess.queries == q {
		t.Errorf("after a multi-statement request: hit %v, settings read again %v", hit, f.sess.queries != q)
	}

	// Text the parser may read otherwise than MariaDB does.
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) /*M!, NOW() */ FROM rates")
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("with a MariaDB executable comment: hit %v, recorded %v", hit, rec)
	}
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	for _, mode := range []string{"ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE"} {
		f.sess.sqlMode = mode
		si.known = false
		if hit, rec, _ := f.run(t, nil, nil); hit || rec {
			t.Errorf("sql_mode %s: hit %v, recorded %v", mode, hit, rec)
		}
	}
	f.sess.sqlMode = "STRICT_TRANS_TABLES"
	si.known = false

	// With autocommit off, a read outside a transaction starts one in the
	// backend: it goes there.
	f.sess.autocommit = "0"
	si.known = false
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("autocommit off: hit %v, recorded %v", hit, rec)
	}
	f.sess.autocommit = "1"
	si.known = false

	// sql_auto_is_null = 1 rules the cache out.
	f.sess.autoNull = "1"
	si.rc.Known = false
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("with sql_auto_is_null: hit %v, recorded %v", hit, rec)
	}
}

func TestResultCacheTransactions(t *testing.T) {
	f := newResultsFixture(t)
	f.run(t, []string{"EUR"}, nil)
	// Inside a transaction: served at the version the transaction pinned,
	// never stored (the backend answers from the transaction's read view).
	f.st.InTx = true
	if hit, _, _ := f.run(t, nil, nil); !hit {
		t.Error("not served inside a transaction")
	}
	f.st.Reset(plugins.ComQuery, "SELECT LOWER(code) FROM rates")
	f.st.InTx = true
	if hit, rec, _ := f.run(t, []string{"eur"}, nil); hit || rec {
		t.Errorf("a miss inside a transaction: hit %v, recorded %v", hit, rec)
	}
	// A transaction that wrote the table reads it from the backend.
	si := session(&f.st)
	si.pinToBackend([]lease.TableID{f.id})
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates")
	f.st.InTx = true
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("after the transaction wrote the table: hit %v, recorded %v", hit, rec)
	}
	// READ UNCOMMITTED may read rows that are rolled back: not stored.
	f.st.InTx = false
	si.pins = nil
	f.sess.isolation = "READ-UNCOMMITTED"
	f.st.Reset(plugins.ComQuery, "SELECT LOWER(code) FROM rates")
	if _, rec, _ := f.run(t, []string{"eur"}, nil); rec {
		t.Error("recorded under READ UNCOMMITTED")
	}
}

func TestResultCacheParams(t *testing.T) {
	f := newResultsFixture(t)
	exec := func(v byte, flags byte, long bool) {
		f.st.ResetMemo(plugins.ComStmtExecute, "SELECT UPPER(code) FROM rates WHERE id = ?", &plugins.Memo{})
		f.st.Params = []byte{flags, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_TINY, 0, v}
		f.st.ParamCount, f.st.ParamTypes, f.st.LongData = 1, []byte{mysql.MYSQL_TYPE_TINY, 0}, long
	}
	exec(1, 0, false)
	if _, rec, _ := f.run(t, []string{"EUR"}, nil); !rec {
		t.Fatal("not recorded")
	}
	exec(1, 0, false)
	if hit, _, _ := f.run(t, nil, nil); !hit {
		t.Error("same parameter: not a hit")
	}
	// Types sent only on the first execution: the same key.
	f.st.Params = []byte{0, 1, 0, 0, 0, 0, 0, 1}
	if hit, _, _ := f.run(t, nil, nil); !hit {
		t.Error("same parameter, types not resent: not a hit")
	}
	exec(2, 0, false)
	if hit, _, _ := f.run(t, []string{"USD"}, nil); hit {
		t.Error("another parameter value: served the first one's answer")
	}
	exec(1, 1, false) // a cursor
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("with a cursor: hit %v, recorded %v", hit, rec)
	}
	exec(1, 0, true) // long data
	if hit, rec, _ := f.run(t, nil, nil); hit || rec {
		t.Errorf("with long data: hit %v, recorded %v", hit, rec)
	}
	// The text protocol's answer is not the binary one.
	f.st.Reset(plugins.ComQuery, "SELECT UPPER(code) FROM rates WHERE id = ?")
	if hit, _, _ := f.run(t, []string{"x"}, nil); hit {
		t.Error("text protocol served a binary answer")
	}
}

func TestResultCacheTruncatedNotStored(t *testing.T) {
	f := newResultsFixture(t)
	si := session(&f.st)
	a := f.p.declined(&f.st, si, &results.Shape{Tables: []lease.TableID{f.id}}, []lease.TableID{f.id})
	c := a.Capture
	if c == nil {
		t.Fatal("no capture")
	}
	// What the relay leaves past the cap.
	c.Data, c.Ends, c.Truncated, c.Results = nil, nil, true, 1
	f.p.OnResult(&f.st, &plugins.Outcome{Source: plugins.FromBackend})
	f.p.results.Store.Wait()
	if f.p.results.Rejects.Load() != 1 || f.p.results.Stores.Load() != 0 {
		t.Errorf("stores %d, rejects %d", f.p.results.Stores.Load(), f.p.results.Rejects.Load())
	}
}

func TestResultTimeColumns(t *testing.T) {
	snap := &eval.Snapshot{Fields: []*mysql.Field{
		{Name: []byte("id"), OrgName: []byte("id"), Type: mysql.MYSQL_TYPE_LONG},
		{Name: []byte("tm"), OrgName: []byte("tm"), Type: mysql.MYSQL_TYPE_TIME},
	}}
	for sql, safe := range map[string]bool{
		"SELECT * FROM d WHERE id > 1":                        true,
		"SELECT CONCAT(id, 'x'), d.* FROM d":                  true,
		"SELECT tm FROM d":                                    false, // named: perhaps compared or cast
		"SELECT id FROM d WHERE TM > '2020-01-01 00:00:00'":   false,
		"SELECT * FROM d UNION SELECT * FROM e":               false,
		"SELECT * FROM d NATURAL JOIN e":                      false,
		"SELECT * FROM d JOIN e USING (id)":                   false,
		"SELECT * FROM e WHERE (1, 2) IN (SELECT * FROM d)":   false,
		"SELECT x.* FROM (SELECT * FROM d) x WHERE x.id > 1":  false,
		"SELECT id FROM d WHERE id IN (SELECT id FROM e)":     true,
		"SELECT d.id, e.name FROM d JOIN e ON e.id = d.id":    true,
		"SELECT COUNT(*), MAX(id) FROM d GROUP BY id % 2":     true,
		"SELECT id FROM d ORDER BY id LIMIT 1 OFFSET 2":       true,
		"SELECT id, SUM(id) FROM d GROUP BY id HAVING id > 1": true,
	} {
		stmts, _, err := parser.New().ParseSQL(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		shape := results.ShapeOf(stmts[0], "shop")
		if shape == nil {
			t.Errorf("%s: not eligible at all", sql)
			continue
		}
		if got := results.TimeSafe(snap, shape); got != safe {
			t.Errorf("%s: safe with a TIME column %v, want %v", sql, got, safe)
		}
	}
}

func TestResultCacheSizes(t *testing.T) {
	for _, tc := range []struct {
		size, entry     string
		budget, maxSize int64
		ok              bool
	}{
		{"", "", 64 << 20, 1 << 20, true},
		{"0", "", 0, 1 << 20, true},
		{"8MB", "64KB", 8 << 20, 64 << 10, true},
		{"lots", "", 0, 0, false},
		{"", "16MB", 0, 0, false}, // a packet that large would be split
		{"", "0", 0, 0, false},
	} {
		budget, maxSize, err := resultCacheSizes(Options{ResultCacheSize: tc.size, ResultCacheEntryMax: tc.entry})
		if (err == nil) != tc.ok || tc.ok && (budget != tc.budget || maxSize != tc.maxSize) {
			t.Errorf("%q/%q: %d, %d, %v", tc.size, tc.entry, budget, maxSize, err)
		}
	}
	if newResultCacheFor(slog.Default(), Options{ResultCacheSize: "0"}) != nil {
		t.Error("a result cache of size 0 was built")
	}
}
