package plugins

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// fakeClock is a settable clock for the rate limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fileQueryLog builds a query log writing to a file in a temporary
// directory, with clock, and returns it with the file's path.
func fileQueryLog(t *testing.T, opts Options, clock *fakeClock) (*queryLog, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slow.log")
	o := Options{"file": path}
	for k, v := range opts {
		o[k] = v
	}
	if clock == nil {
		clock = newFakeClock()
	}
	q, err := newQueryLogPlugin(o, Env{}, clock.Now)
	if err != nil {
		t.Fatalf("build querylog: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q, path
}

// readLog closes q and returns its file's lines, decoded, failing the test
// on a line that is not one JSON object.
func readLog(t *testing.T, q *queryLog, path string) []map[string]any {
	t.Helper()
	if err := q.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&m); err != nil || dec.More() {
			t.Fatalf("line %d is not one JSON object (%v): %s", len(lines)+1, err, sc.Bytes())
		}
		lines = append(lines, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func slowQueries(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == "slow query" {
			out = append(out, l)
		}
	}
	return out
}

func TestQueryLogThreshold(t *testing.T) {
	q, path := fileQueryLog(t, nil, nil) // default threshold 200ms
	for _, ms := range []int{5, 199, 200, 450} {
		q.OnResult(stmt(ComQuery, fmt.Sprintf("SELECT SLEEP(%d)", ms)), &Outcome{Duration: time.Duration(ms) * time.Millisecond})
	}
	lines := slowQueries(readLog(t, q, path))
	if len(lines) != 2 {
		t.Fatalf("logged %d statements, want the 2 at or over 200ms: %v", len(lines), lines)
	}
	if lines[0]["duration_ms"] != 200.0 || lines[1]["duration_ms"] != 450.0 {
		t.Errorf("durations %v, %v; want 200, 450", lines[0]["duration_ms"], lines[1]["duration_ms"])
	}

	q, path = fileQueryLog(t, Options{"threshold": "0s"}, nil)
	q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{Duration: 0})
	q.OnResult(stmt(ComQuery, "SELECT 2"), &Outcome{Duration: time.Microsecond})
	if n := len(slowQueries(readLog(t, q, path))); n != 2 {
		t.Errorf("threshold 0s logged %d of 2 statements", n)
	}
}

// Statements under the threshold must not pay for a digest.
func TestQueryLogFastPathSkipsDigest(t *testing.T) {
	q, _ := fileQueryLog(t, nil, nil)
	st := stmt(ComQuery, "SELECT * FROM t WHERE id = 1")
	q.OnResult(st, &Outcome{Duration: time.Millisecond})
	if st.digest != "" {
		t.Error("a fast statement had its digest computed")
	}
	q.OnResult(st, &Outcome{Duration: time.Second})
	if st.digest == "" {
		t.Error("a slow statement was logged without its digest")
	}
}

func TestQueryLogLineContents(t *testing.T) {
	q, path := fileQueryLog(t, Options{"threshold": "10ms"}, nil)
	st := stmt(ComStmtExecute, "UPDATE users SET pw = ? WHERE id = ?")
	st.ConnID, st.User, st.DB = 42, "alice", "accounts"
	q.OnResult(st, &Outcome{Duration: 1500 * time.Millisecond, Source: FromBackend, AffectedRows: 3})
	q.OnResult(stmt(ComQuery, "SELECT * FROM missing"), &Outcome{Duration: time.Second, Source: FromBackend,
		Err: &mysql.MyError{Code: mysql.ER_NO_SUCH_TABLE, State: "42S02", Message: "Table 'shop.missing' doesn't exist"}})
	q.OnResult(stmt(ComQuery, "SELECT * FROM big"), &Outcome{Duration: time.Second, Source: FromPlugin, Plugin: "cache", Rows: 5000})

	lines := readLog(t, q, path)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	want := map[string]any{
		"msg": "slow query", "conn_id": 42.0, "user": "alice", "db": "accounts",
		"command": "execute", "kind": "update", "duration_ms": 1500.0, "rows": 0.0,
		"affected_rows": 3.0, "source": "backend", "digest": st.Digest(),
		"statement": "update `users` set `pw` = ? where `id` = ?",
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %#v, want %#v", k, lines[0][k], v)
		}
	}
	if ts, ok := lines[0]["time"].(string); !ok {
		t.Errorf("time = %#v, want a timestamp", lines[0]["time"])
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("time %q: %v", ts, err)
	}
	if _, ok := lines[0]["error_code"]; ok {
		t.Error("a successful statement has an error_code")
	}
	if lines[1]["error_code"] != 1146.0 || lines[1]["error_state"] != "42S02" {
		t.Errorf("error fields %v %v, want 1146 42S02", lines[1]["error_code"], lines[1]["error_state"])
	}
	if msg, _ := lines[1]["error_message"].(string); !strings.HasPrefix(msg, "Table ") {
		t.Errorf("error_message = %q", msg)
	}
	if lines[2]["rows"] != 5000.0 || lines[2]["source"] != "plugin" || lines[2]["plugin"] != "cache" {
		t.Errorf("plugin answer logged as %v", lines[2])
	}
}

// The default log must never carry a statement's literals: not in the
// statement, and not in a backend error message that quotes it.
func TestQueryLogHidesLiterals(t *testing.T) {
	const secret = "hunter2-secret"
	sqls := []string{
		"UPDATE users SET pw='" + secret + "' WHERE id=1",
		`UPDATE users SET pw="` + secret + `" WHERE id=1`,
		"INSERT INTO users (name, pw) VALUES ('bob', '" + secret + "')",
		"SELECT * FROM users WHERE pw = '" + secret + "' /* " + secret + " */",
		"CREATE USER bob IDENTIFIED BY '" + secret + "'",
		"UPDATE users SET pw='" + secret, // unterminated
	}
	backendErrs := []*mysql.MyError{
		nil,
		{Code: 1064, State: "42000", Message: "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '" + secret + "' WHERE id=1' at line 1"},
		{Code: 1062, State: "23000", Message: "Duplicate entry '" + secret + "' for key 'pw'"},
	}

	q, path := fileQueryLog(t, Options{"threshold": "0s", "rate_limit": 0}, nil)
	var buf bytes.Buffer
	ql, err := newQueryLogPlugin(Options{"threshold": "0s"}, Env{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range sqls {
		for _, e := range backendErrs {
			out := &Outcome{Duration: time.Second, Source: FromBackend, Err: e}
			q.OnResult(stmt(ComQuery, sql), out)
			ql.OnResult(stmt(ComQuery, sql), out)
		}
	}
	lines := readLog(t, q, path)
	if len(lines) != len(sqls)*len(backendErrs) {
		t.Fatalf("%d lines, want %d", len(lines), len(sqls)*len(backendErrs))
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte(secret)) {
		t.Errorf("the file log contains a literal:\n%s", raw)
	}
	if bytes.Contains(buf.Bytes(), []byte(secret)) {
		t.Errorf("the slog log contains a literal:\n%s", buf.Bytes())
	}
	if !strings.Contains(lines[0]["statement"].(string), "`pw` = ?") {
		t.Errorf("statement %q is not the normalized form", lines[0]["statement"])
	}
	if got := lines[1]["error_message"]; got != "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '?' at line 1" {
		t.Errorf("redacted syntax error = %q", got)
	}

	// With literals on, the statement is logged as sent.
	q, path = fileQueryLog(t, Options{"threshold": "0s", "literals": true}, nil)
	q.OnResult(stmt(ComQuery, sqls[0]), &Outcome{Source: FromBackend, Err: backendErrs[2]})
	lines = readLog(t, q, path)
	if lines[0]["statement"] != sqls[0] || lines[0]["error_message"] != backendErrs[2].Message {
		t.Errorf("literals: true logged %q / %q", lines[0]["statement"], lines[0]["error_message"])
	}
}

func TestRedactQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"no quotes here":                                         "no quotes here",
		"Duplicate entry 'x' for key 'k'":                        "Duplicate entry '?'",
		"Incorrect integer value: 'abc' for column `c` at row 1": "Incorrect integer value: '?' for column `c` at row 1",
		"near 'unterminated":                                     "near '?'",
		"'":                                                      "'?'",
		"":                                                       "",
	} {
		if got := redactQuoted(in); got != want {
			t.Errorf("redactQuoted(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQueryLogSlog(t *testing.T) {
	var buf bytes.Buffer
	q, err := newQueryLogPlugin(Options{"threshold": "1ms"}, Env{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	st := stmt(ComQuery, "DELETE FROM t WHERE id = 9")
	q.OnResult(st, &Outcome{Duration: 2 * time.Millisecond, Source: FromBackend, AffectedRows: 1})
	q.OnResult(st, &Outcome{Duration: 0})
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("want exactly one JSON record, got %q: %v", buf.String(), err)
	}
	for k, v := range map[string]any{
		"level": "INFO", "msg": "slow query", "conn_id": 7.0, "user": "app", "db": "shop",
		"command": "query", "kind": "delete", "duration_ms": 2.0, "affected_rows": 1.0,
		"source": "backend", "digest": st.Digest(), "statement": "delete from `t` where `id` = ?",
	} {
		if rec[k] != v {
			t.Errorf("%s = %#v, want %#v", k, rec[k], v)
		}
	}
}

// Every line is one JSON object whatever the statement holds.
func TestQueryLogOneObjectPerLine(t *testing.T) {
	q, path := fileQueryLog(t, Options{"threshold": "0s", "literals": true, "rate_limit": 0}, nil)
	sqls := []string{
		"SELECT 'line one\nline two'",
		"SELECT \"quote\\\" and backslash\\\\\"",
		"SELECT '\u2028\u2029 separators'",
		"SELECT 'invalid \xff\xfe utf8'",
		"SELECT '</script><b>'",
		"",
	}
	for _, s := range sqls {
		q.OnResult(stmt(ComQuery, s), &Outcome{})
	}
	lines := readLog(t, q, path)
	if len(lines) != len(sqls) {
		t.Fatalf("%d lines for %d statements", len(lines), len(sqls))
	}
	if lines[0]["statement"] != sqls[0] || lines[4]["statement"] != sqls[4] {
		t.Errorf("statements changed on the way: %q %q", lines[0]["statement"], lines[4]["statement"])
	}
}

func TestQueryLogTruncation(t *testing.T) {
	q, path := fileQueryLog(t, Options{"threshold": "0s", "literals": true, "max_length": 10}, nil)
	q.OnResult(stmt(ComQuery, "SELECT 'ééééééééééééé'"), &Outcome{})
	q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	lines := readLog(t, q, path)
	got := lines[0]["statement"].(string)
	if got != "SELECT 'éé" || lines[0]["truncated"] != true {
		t.Errorf("truncated to %q (truncated=%v), want %q", got, lines[0]["truncated"], "SELECT 'éé")
	}
	if lines[1]["statement"] != "SELECT 1" || lines[1]["truncated"] != nil {
		t.Errorf("short statement logged as %q truncated=%v", lines[1]["statement"], lines[1]["truncated"])
	}

	// The default keeps 2048 characters; 0 keeps everything.
	long := "SELECT " + strings.Repeat("c, ", 1000) + "c FROM t"
	for _, c := range []struct {
		opts Options
		want int
	}{
		{Options{"threshold": "0s", "literals": true}, 2048},
		{Options{"threshold": "0s", "literals": true, "max_length": 0}, len(long)},
	} {
		q, path := fileQueryLog(t, c.opts, nil)
		q.OnResult(stmt(ComQuery, long), &Outcome{})
		if n := len(readLog(t, q, path)[0]["statement"].(string)); n != c.want {
			t.Errorf("%v: statement of %d characters logged as %d, want %d", c.opts, len(long), n, c.want)
		}
	}
}

func TestTruncateRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 0, "abc"}, {"abc", 3, "abc"}, {"abcd", 3, "abc"},
		{"日本語テキスト", 3, "日本語"}, {"a日", 1, "a"}, {"日本", 2, "日本"},
		{"\xff\xfe\xfd", 2, "\xff\xfe"},
	} {
		got, _ := truncateRunes(c.in, c.max)
		if got != c.want {
			t.Errorf("truncateRunes(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if utf8.ValidString(c.in) && !utf8.ValidString(got) {
			t.Errorf("truncateRunes(%q, %d) split a character", c.in, c.max)
		}
	}
}

func TestQueryLogRateLimit(t *testing.T) {
	clock := newFakeClock()
	q, path := fileQueryLog(t, Options{"threshold": "0s", "rate_limit": 3}, clock)
	slow := &Outcome{Duration: time.Second}

	for i := range 10 { // 3 logged, 7 suppressed
		q.OnResult(stmt(ComQuery, fmt.Sprintf("SELECT %d FROM a", i)), slow)
		clock.Advance(10 * time.Millisecond)
	}
	clock.Advance(time.Second)
	q.OnResult(stmt(ComQuery, "SELECT 1 FROM b"), slow) // new window: report, then log

	for range 4 { // 2 more fit in the window b opened, 3 are suppressed...
		q.OnResult(stmt(ComQuery, "SELECT 1 FROM c"), slow)
	}
	suppressed := stmt(ComQuery, "SELECT 1 FROM c")
	q.OnResult(suppressed, slow)
	if suppressed.digest != "" {
		t.Error("a suppressed line had its digest computed")
	}
	q.tick() // ...and not reported while the window is open
	if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(`"suppressed":3`)) {
		t.Errorf("reported before the window ended:\n%s", b)
	}
	clock.Advance(1500 * time.Millisecond)
	q.tick() // the window is over: report without waiting for a statement
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(`"suppressed":3`)) {
		t.Errorf("the flusher did not report the ended window:\n%s", b)
	}

	for range 6 { // 3 logged, 3 suppressed and reported by Close
		q.OnResult(stmt(ComQuery, "SELECT 1 FROM d"), slow)
	}

	lines := readLog(t, q, path)
	var got []string
	for _, l := range lines {
		if n, ok := l["suppressed"]; ok {
			got = append(got, fmt.Sprintf("suppressed %v", n))
			if l["rate_limit"] != 3.0 || l["since"] == nil {
				t.Errorf("suppression line %v lacks rate_limit or since", l)
			}
			continue
		}
		got = append(got, strings.TrimPrefix(l["statement"].(string), "select ? from "))
	}
	want := []string{
		"`a`", "`a`", "`a`", "suppressed 7",
		"`b`", "`c`", "`c`", "suppressed 3",
		"`d`", "`d`", "`d`", "suppressed 3",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("log:\n got %q\nwant %q", got, want)
	}
}

// With the slog output, suppressed lines are reported as a warning.
func TestQueryLogRateLimitSlog(t *testing.T) {
	clock := newFakeClock()
	var buf bytes.Buffer
	q, err := newQueryLogPlugin(Options{"threshold": "0s", "rate_limit": 1}, Env{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	}
	q.Close()
	out := buf.String()
	if n := strings.Count(out, `"msg":"slow query"`); n != 1 {
		t.Errorf("%d slow query records, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, `"level":"WARN","msg":"slow query lines suppressed by rate_limit","suppressed":3`) {
		t.Errorf("no warning reporting 3 suppressed lines:\n%s", out)
	}
}

func TestQueryLogConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slow.log")
	f, _ := lookup("querylog")
	p, err := f(Options{"file": path, "threshold": "0s", "rate_limit": 0}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	q := p.(*queryLog)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &Statement{ConnID: uint32(w)}
			for i := range each {
				st.Reset(ComQuery, fmt.Sprintf("SELECT %d, '%s'", i, strings.Repeat("x", i)))
				q.OnResult(st, &Outcome{Duration: time.Duration(i)})
			}
		}()
	}
	wg.Add(1)
	go func() { // the flusher's work, concurrently
		defer wg.Done()
		for range 50 {
			q.tick()
		}
	}()
	wg.Wait()
	if n := len(readLog(t, q, path)); n != workers*each {
		t.Errorf("%d lines, want %d", n, workers*each)
	}
	// After Close, statements are dropped quietly.
	q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	if err := q.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Lines reach the file within a flush interval, without Close.
func TestQueryLogFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slow.log")
	f, _ := lookup("querylog")
	p, err := f(Options{"file": path, "threshold": "0s"}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.(Closer).Close()
	p.(StatementObserver).OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(`"statement":"select ?"`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing flushed after 5s; file holds %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestQueryLogOptions(t *testing.T) {
	f, _ := lookup("querylog")
	dir := t.TempDir()
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{"threshold": "-1s"}, "threshold"},
		{Options{"threshold": "fast"}, "fast"},
		{Options{"max_length": -1}, "max_length"},
		{Options{"max_length": 1.5}, "max_length"},
		{Options{"rate_limit": -5}, "rate_limit"},
		{Options{"file": filepath.Join(dir, "missing", "slow.log")}, "file"},
		{Options{"treshold": "1s"}, `"treshold"`},
	} {
		p, err := f(c.opts, Env{})
		if err == nil {
			p.(Closer).Close()
			t.Errorf("options %v accepted", c.opts)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %v: error %q does not name %s", c.opts, err, c.want)
		}
	}

	// A number of seconds is a threshold too.
	q, err := newQueryLogPlugin(Options{"threshold": 0.5}, Env{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if q.threshold != 500*time.Millisecond || q.limit != defaultRateLimit || q.maxLen != defaultMaxLength || q.literals {
		t.Errorf("threshold %v limit %d max %d literals %v", q.threshold, q.limit, q.maxLen, q.literals)
	}
}

func TestQueryLogFileMode(t *testing.T) {
	q, path := fileQueryLog(t, nil, nil)
	q.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("log file mode %v is readable by others", fi.Mode().Perm())
	}
}

func BenchmarkQueryLogOnResultBelowThreshold(b *testing.B) {
	q, err := newQueryLogPlugin(nil, Env{}, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	st := stmt(ComQuery, "SELECT c FROM sbtest1 WHERE id = 42")
	out := &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend, Rows: 1}
	b.ReportAllocs()
	for b.Loop() {
		q.OnResult(st, out)
	}
}

func BenchmarkQueryLogOnResultSlow(b *testing.B) {
	q, err := newQueryLogPlugin(Options{"file": filepath.Join(b.TempDir(), "slow.log"), "rate_limit": 0}, Env{}, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	st := stmt(ComQuery, "SELECT c FROM sbtest1 WHERE id = 42")
	out := &Outcome{Duration: time.Second, Source: FromBackend, Rows: 1}
	b.ReportAllocs()
	for b.Loop() {
		st.Reset(ComQuery, st.SQL) // a new statement: its digest is not cached
		q.OnResult(st, out)
	}
}

// A failing file (disk full) is reported once through the logger, and Close
// returns the error.
func TestQueryLogWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	var buf bytes.Buffer
	q, err := newQueryLogPlugin(Options{"file": "/dev/full", "threshold": "0s"},
		Env{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
		q.tick()
	}
	if n := strings.Count(buf.String(), "writing the file failed"); n != 1 {
		t.Errorf("%d warnings about the failing file, want 1:\n%s", n, buf.String())
	}
	q.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	if err := q.Close(); err == nil {
		t.Error("Close did not report the failed write")
	}
}
