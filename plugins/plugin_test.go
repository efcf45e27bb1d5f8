package plugins

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/sqllex"
)

// fake is a plugin that records its calls in a shared log.
type fake struct {
	name   string
	action Action
	log    *[]string
}

func (f *fake) Name() string { return f.name }

func (f *fake) OnStatement(st *Statement) Action {
	*f.log = append(*f.log, f.name+".filter")
	return f.action
}

type fakeObserver struct {
	name string
	log  *[]string
}

func (o *fakeObserver) Name() string { return o.name }

func (o *fakeObserver) OnResult(st *Statement, out *Outcome) {
	*o.log = append(*o.log, o.name+".result")
}

func (o *fakeObserver) OnConn(ev ConnEvent) {
	*o.log = append(*o.log, o.name+".conn."+ev.Kind.String())
}

// both filters and observes.
type both struct {
	fake
	fakeObserver
}

func (b *both) Name() string { return b.fake.name }

type closer struct {
	name string
	err  error
	log  *[]string
}

func (c *closer) Name() string { return c.name }

func (c *closer) Close() error {
	*c.log = append(*c.log, c.name+".close")
	return c.err
}

func TestChainFirstDecisionWins(t *testing.T) {
	refusal := &mysql.MyError{Code: 1045, State: "28000", Message: "no"}
	answer := AnswerWith(ResponderFunc(func(w ResponseWriter) error { return nil }))
	for _, c := range []struct {
		name      string
		actions   []Action
		want      Verdict
		wantBy    string
		wantCalls string
	}{
		{"all pass", []Action{Continue, Continue, Continue}, Pass, "", "a b c"},
		{"refuse stops the walk", []Action{Continue, RefuseWith(refusal), answer}, Refuse, "b", "a b"},
		{"answer stops the walk", []Action{answer, RefuseWith(refusal), Continue}, Answer, "a", "a"},
		{"last refuses", []Action{Continue, Continue, RefuseWith(refusal)}, Refuse, "c", "a b c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			var ps []Plugin
			for i, a := range c.actions {
				ps = append(ps, &fake{name: string(rune('a' + i)), action: a, log: &log})
			}
			got, by := NewChain(ps...).Before(stmt(ComQuery, "SELECT 1"))
			if got.Verdict != c.want || by != c.wantBy {
				t.Errorf("Before = %v by %q, want %v by %q", got.Verdict, by, c.want, c.wantBy)
			}
			if c.want == Refuse && got.Err != refusal {
				t.Errorf("the refusal's error was not passed on: %v", got.Err)
			}
			if c.want == Answer && got.Responder == nil {
				t.Error("the answer's responder was not passed on")
			}
			calls := strings.ReplaceAll(strings.Join(log, " "), ".filter", "")
			if calls != c.wantCalls {
				t.Errorf("filters called: %q, want %q", calls, c.wantCalls)
			}
		})
	}
}

func TestChainObservers(t *testing.T) {
	var log []string
	c := NewChain(
		&fakeObserver{name: "o1", log: &log},
		&fake{name: "f", log: &log},
		&both{fake{name: "b", log: &log}, fakeObserver{name: "b", log: &log}},
		&fakeObserver{name: "o2", log: &log},
	)
	if !c.HasObservers() {
		t.Error("HasObservers is false")
	}
	if a, _ := c.Before(stmt(ComQuery, "SELECT 1")); a.Verdict != Pass {
		t.Fatal("a passing chain did not pass")
	}
	c.After(stmt(ComQuery, "SELECT 1"), &Outcome{})
	c.Conn(ConnEvent{Kind: ConnOpened})
	want := "f.filter b.filter o1.result b.result o2.result o1.conn.opened b.conn.opened o2.conn.opened"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("calls:\n got %s\nwant %s", got, want)
	}
	if n := len(c.Plugins()); n != 4 {
		t.Errorf("Plugins() has %d, want 4", n)
	}
	if NewChain(&fake{name: "f", log: &log}).HasObservers() {
		t.Error("a chain of filters claims observers")
	}
}

// The proxy may run without a chain.
func TestNilChain(t *testing.T) {
	var c *Chain
	if a, by := c.Before(stmt(ComQuery, "SELECT 1")); a.Verdict != Pass || by != "" {
		t.Error("a nil chain does not pass")
	}
	c.After(stmt(ComQuery, "SELECT 1"), &Outcome{})
	c.Conn(ConnEvent{})
	if c.HasObservers() || c.Close() != nil {
		t.Error("a nil chain has observers or fails to close")
	}
}

func TestChainClose(t *testing.T) {
	var log []string
	c := NewChain(
		&closer{name: "a", log: &log},
		&closer{name: "b", err: errors.New("disk full"), log: &log},
		&fake{name: "f", log: &log},
		&closer{name: "c", err: errors.New("busy"), log: &log},
	)
	err := c.Close()
	if got := strings.Join(log, " "); got != "a.close b.close c.close" {
		t.Errorf("closed %q, want every closer", got)
	}
	if err == nil || !strings.Contains(err.Error(), "plugin b: disk full") || !strings.Contains(err.Error(), "plugin c: busy") {
		t.Errorf("Close = %v, want both errors with their plugin", err)
	}
}

func TestRegistry(t *testing.T) {
	builtins := Builtins()
	for _, name := range []string{"metrics", "querylog", "firewall"} {
		if _, ok := builtins[name]; !ok {
			t.Errorf("built-in plugin %s is not registered", name)
		}
	}
	if _, ok := builtins["nope"]; ok {
		t.Error("Lookup found an unregistered plugin")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	builtins.Add("metrics", newMetrics)
}

// closeLog records the closing of test-closer plugins.
var closeLog []string

// testFactories are the built-in plugins and two of the tests' own.
func testFactories() Factories {
	f := Builtins()
	f.Add("test-closer", func(opts Options, env Env) (Plugin, error) {
		return &closer{name: "test-closer", log: &closeLog}, nil
	})
	f.Add("test-failing", func(opts Options, env Env) (Plugin, error) {
		return nil, errors.New("threshold: bad")
	})
	return f
}

func TestBuild(t *testing.T) {
	_, err := Build([]Spec{{Name: "test-closer"}, {Name: "metrix"}}, Env{}, testFactories())
	if err == nil {
		t.Fatal("an unknown plugin was accepted")
	}
	for _, want := range []string{`plugins[1]: unknown plugin "metrix"`, "metrics", "querylog", "firewall", "test-closer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}

	// When a plugin fails to build, the ones already built are closed.
	closeLog = nil
	_, err = Build([]Spec{{Name: "test-closer"}, {Name: "test-failing"}}, Env{}, testFactories())
	if err == nil || err.Error() != "plugins[1] (test-failing): threshold: bad" {
		t.Errorf("error %v, want it to name the plugin and keep its message", err)
	}
	if strings.Join(closeLog, " ") != "test-closer.close" {
		t.Errorf("after a failed build, closed %q", closeLog)
	}

	c, err := Build([]Spec{{Name: "test-closer"}, {Name: "firewall", Options: rules(map[string]any{"name": "r", "kinds": []any{"ddl"}})}}, Env{}, testFactories())
	if err != nil {
		t.Fatal(err)
	}
	if ps := c.Plugins(); len(ps) != 2 || ps[0].Name() != "test-closer" || ps[1].Name() != "firewall" {
		t.Errorf("chain %v is not in spec order", ps)
	}
	if a, by := c.Before(stmt(ComQuery, "DROP TABLE t")); a.Verdict != Refuse || by != "firewall" {
		t.Errorf("built chain: %v by %q", a.Verdict, by)
	}
}

type decodeTarget struct {
	Name    string   `json:"name"`
	Count   int      `json:"count"`
	Wait    Duration `json:"wait"`
	Enabled bool     `json:"enabled"`
}

func TestDecodeOptions(t *testing.T) {
	d := decodeTarget{Name: "default", Count: 3}
	if err := DecodeOptions(nil, &d); err != nil || d.Name != "default" || d.Count != 3 {
		t.Errorf("no options changed the defaults: %+v, %v", d, err)
	}
	if err := DecodeOptions(Options{"count": 5, "wait": "250ms", "enabled": true}, &d); err != nil {
		t.Fatal(err)
	}
	if d != (decodeTarget{Name: "default", Count: 5, Wait: Duration(250 * time.Millisecond), Enabled: true}) {
		t.Errorf("decoded %+v", d)
	}

	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{"name": "x", "cuont": 1}, `unknown field "cuont"`},
		{Options{"count": "many"}, "count"},
		{Options{"wait": "soon"}, `"soon"`},
		{Options{"wait": true}, "duration"},
		{Options{"bad": func() {}}, "options"},
	} {
		err := DecodeOptions(c.opts, &decodeTarget{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeOptions(%v) = %v, want an error mentioning %s", c.opts, err, c.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"200ms"`: 200 * time.Millisecond,
		`"1.5s"`:  1500 * time.Millisecond,
		`"1m30s"`: 90 * time.Second,
		`"0s"`:    0,
		`2`:       2 * time.Second,
		`0.25`:    250 * time.Millisecond,
		`0`:       0,
	} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if time.Duration(d) != want {
			t.Errorf("%s = %v, want %v", in, time.Duration(d), want)
		}
	}
	for _, in := range []string{`"200"`, `"fast"`, `""`, `true`, `[1]`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s was accepted as %v", in, time.Duration(d))
		}
	}
	b, err := json.Marshal(Duration(1500 * time.Millisecond))
	if err != nil || string(b) != `"1.5s"` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	var back Duration
	if err := json.Unmarshal(b, &back); err != nil || back != Duration(1500*time.Millisecond) {
		t.Errorf("round trip = %v, %v", back, err)
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		ComQuery.String(): "query", ComStmtPrepare.String(): "prepare", ComStmtExecute.String(): "execute",
		Command(1).String():  "command(1)",
		FromBackend.String(): "backend", FromPlugin.String(): "plugin", FromProxy.String(): "proxy",
		ConnOpened.String(): "opened", ConnClosed.String(): "closed", ConnRejected.String(): "rejected",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

func TestStatementDigest(t *testing.T) {
	st := &Statement{ConnID: 1, User: "app", DB: "shop"}
	st.Reset(ComQuery, "SELECT * FROM t WHERE id = 1")
	d1, n1 := st.Digest(), st.Normalized()
	if n1 != "select * from `t` where `id` = ?" || len(d1) != 64 {
		t.Errorf("normalized %q, digest %q", n1, d1)
	}
	st.Reset(ComStmtExecute, "select * from t where id = ?")
	if st.Digest() != d1 || st.Kind != KindSelect || st.Command != ComStmtExecute {
		t.Error("statements differing only in literals have different digests")
	}
	st.Reset(ComQuery, "SELECT * FROM u WHERE id = 1")
	if st.Digest() == d1 {
		t.Error("Reset kept the previous statement's digest")
	}
	if st.User != "app" || st.DB != "shop" || st.ConnID != 1 {
		t.Error("Reset lost the session fields")
	}
}

// Statement digesting runs the TiDB lexer over whatever a client sends.
func FuzzStatementDigest(f *testing.F) {
	for _, s := range []string{
		"", "SELECT 1", "UPDATE users SET pw='x' WHERE id=1", "'", "\"", "`", "/*", "/*!", "x'zz'", "0x",
		"SELECT 1e", "\x00", "\xff\xfe", "SELECT ?", "SELECT $$", "SELECT @@", "SELECT 1 -- x", "N'", "_utf8'",
		"SELECT * FROM t WHERE id IN (1,2,3)", "\\", "{", "SELECT 'a' 'b'",
	} {
		f.Add(s)
	}
	one := stmt(ComQuery, "SELECT 1").Digest()
	st := &Statement{}
	f.Fuzz(func(t *testing.T, sql string) {
		st.Reset(ComQuery, sql)
		d, n := st.Digest(), st.Normalized()
		if len(d) != 64 {
			t.Fatalf("digest of %q is %q", sql, d)
		}
		if st.Digest() != d || st.Normalized() != n {
			t.Fatalf("digest of %q is not stable", sql)
		}
		// Reset must drop the cached digest.
		st.Reset(ComQuery, "SELECT 1")
		if st.Digest() != one {
			t.Fatalf("after %q, Reset kept a stale digest", sql)
		}
	})
}

func TestMemoKeepsDerivedValues(t *testing.T) {
	var m Memo
	var st Statement
	st.ResetMemo(ComStmtExecute, "SELECT * FROM t WHERE id = ?", &m)
	d := st.Digest()
	if st.Kind != KindSelect || d == "" || m.digest != d || m.normalized != st.Normalized() {
		t.Fatalf("memo %+v, kind %v, digest %q", m, st.Kind, d)
	}
	// A later execution starts from the memo and does not recompute.
	m.normalized, m.digest = "memo-normalized", "memo-digest"
	st.Reset(ComQuery, "SELECT 1")
	st.ResetMemo(ComStmtExecute, "SELECT * FROM t WHERE id = ?", &m)
	if st.Digest() != "memo-digest" || st.Normalized() != "memo-normalized" {
		t.Fatalf("recomputed: %q %q", st.Digest(), st.Normalized())
	}
}

// lookup is the built-in plugin's factory by name.
func lookup(name string) (Factory, bool) {
	f, ok := Builtins()[name]
	return f, ok
}

// Under NO_BACKSLASH_ESCAPES a backslash ends no string: the digest text
// of a statement whose string ends in one keeps none of the literals after
// it, and equals the same statement's with other values.
func TestDigestUnderNoBackslashEscapes(t *testing.T) {
	st := &Statement{NoBackslashEscapes: true}
	st.Reset(ComQuery, `SELECT * FROM t WHERE a = 'C:\' AND secret = 'hunter2'`)
	st.NoBackslashEscapes = true
	n, d := st.Normalized(), st.Digest()
	if strings.Contains(n, "hunter2") || strings.Contains(n, "C:") {
		t.Fatalf("digest text keeps a literal: %s", n)
	}
	st.Reset(ComQuery, `SELECT * FROM t WHERE a = 'x' AND secret = 'y'`)
	st.NoBackslashEscapes = true
	if st.Digest() != d {
		t.Fatalf("digests differ: %s vs %s", n, st.Normalized())
	}
}

// Under ANSI_QUOTES (which no status flag shows) "a\" is an identifier
// and the backslash in it a character; read as a string, its backslash
// would escape the quote, and the string would run on over the next
// literal. The digest text keeps no literal under either reading.
func TestDigestUnderEitherQuoteReading(t *testing.T) {
	for _, nbe := range []bool{false, true} {
		for _, sql := range []string{
			`SELECT "a\", 'hunter2' FROM t`,
			`SELECT * FROM t WHERE "c\" = 'hunter2' AND b = "x"`,
			`SELECT "a\" , 'x" hunter2'`,
			`SELECT * FROM t WHERE "c\" = 'x" AND hunter2 = 1 OR "y' AND b = 1`,
		} {
			st := &Statement{}
			st.Reset(ComQuery, sql)
			st.NoBackslashEscapes = nbe
			if n := st.Normalized(); strings.Contains(n, "hunter2") {
				t.Errorf("NO_BACKSLASH_ESCAPES %v: %s: digest text keeps a literal: %s", nbe, sql, n)
			}
		}
	}
	// Without a backslash both readings agree: digests are as before.
	st := &Statement{}
	st.Reset(ComQuery, `SELECT * FROM t WHERE a = "x" AND b = 'y'`)
	if n := st.Normalized(); strings.Contains(n, "x") && !strings.Contains(n, "?") {
		t.Errorf("digest text: %s", n)
	}
}

// FuzzDigestKeepsNoLiteral: under each of the four readings of quotes a
// session may have (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, both, neither), a
// word found only inside string literals of the statement never appears
// in its digest text. (The proxy knows the first setting, not the second.)
func FuzzDigestKeepsNoLiteral(f *testing.F) {
	for _, s := range []string{
		`SELECT "a\" , 'x" hunter2'`, `SELECT * FROM t WHERE "c\" = 'x" AND hunter2 = 1 OR "y' AND b = 1`,
		`SELECT 'a\' , 'hunter2'`, `SELECT "x\\", 'hunter2'`, `UPDATE t SET pw = 'hunter2' WHERE id = 1`,
		`SELECT /* 'x */ 'hunter2'`, `SELECT 'it''s' "q""x" hunter2`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	words := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
	}
	f.Fuzz(func(t *testing.T, sql string, nbe bool) {
		st := &Statement{}
		st.Reset(ComQuery, sql)
		st.NoBackslashEscapes = nbe
		norm := strings.ToLower(st.Normalized())
		for _, ansi := range []bool{false, true} {
			toks := sqllex.Tokens(sql, !nbe)
			if ansi {
				toks = sqllex.TokensANSIQuotes(sql, !nbe)
			}
			inside, outside := map[string]bool{}, map[string]bool{}
			last := 0
			for _, tk := range toks {
				for _, w := range words(strings.ToLower(sql[last:tk.Start])) {
					outside[w] = true // (comments and code between tokens)
				}
				last = tk.End
				seg := strings.ToLower(sql[tk.Start:tk.End])
				for _, w := range words(seg) {
					if tk.Kind == sqllex.String {
						inside[w] = true
					} else {
						outside[w] = true
					}
				}
			}
			for _, w := range words(strings.ToLower(sql[last:])) {
				outside[w] = true
			}
			for w := range inside {
				if len(w) >= 4 && !outside[w] && slices.Contains(words(norm), w) {
					t.Fatalf("NO_BACKSLASH_ESCAPES %v, ANSI_QUOTES %v: %q: the literal word %q is in the digest text %q", nbe, ansi, sql, w, norm)
				}
			}
		}
	})
}
