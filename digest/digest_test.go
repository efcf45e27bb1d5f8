package digest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"tableproxy/cache/eval"
	"tableproxy/internal/configdoc"
	"tableproxy/plugins"
)

func TestOptionsDocumented(t *testing.T) {
	keys := map[string]reflect.Type{}
	configdoc.Keys(reflect.TypeOf(Options{}), "", keys)
	configdoc.CheckPlugin(t, Name, keys, t.TempDir(), func(raw map[string]any) (any, error) {
		return parseOptions(raw)
	})
}

func TestOptionsRefused(t *testing.T) {
	for _, raw := range []plugins.Options{{"top": 0}, {"others": -1}, {"min_covered_share": 101},
		{"max_write_share": -1}, {"write_penalty": "-1ms"}, {"nosuch": 1}} {
		if _, err := parseOptions(raw); err == nil {
			t.Errorf("%v: accepted", raw)
		}
	}
}

// clock is a fake time that moves by a microsecond per reading.
func clock() func() time.Time {
	t := time.Unix(1_700_000_000, 0)
	return func() time.Time { t = t.Add(time.Microsecond); return t }
}

func record(s *Store, key string, o Observation) {
	k := Key{Digest: key, Schema: "db", User: "u"}
	if !s.Record(k, &o) {
		s.Add(&Entry{Key: k, Text: key}, &o)
	}
}

func counts(s *Store) map[string]uint64 {
	entries, _ := s.Snapshot()
	out := map[string]uint64{}
	for _, e := range entries {
		out[e.Digest] = e.Count
	}
	return out
}

// The store keeps the top N by count and an LRU of M others: a digest of
// the LRU that counts more than the top's least takes its place, and the
// least recently seen of the others is forgotten first.
func TestStoreTopAndLRU(t *testing.T) {
	s := NewStore(2, 2, clock())
	for i, n := range map[string]int{"a": 10, "b": 5} {
		for j := 0; j < n; j++ {
			record(s, i, Observation{Where: -1})
		}
	}
	record(s, "c", Observation{Where: -1})
	record(s, "d", Observation{Where: -1})
	record(s, "e", Observation{Where: -1}) // the LRU holds 2: c goes
	if got := counts(s); len(got) != 4 || got["c"] != 0 || got["d"] != 1 || got["e"] != 1 {
		t.Fatalf("after the LRU overflowed: %v", got)
	}
	for j := 0; j < 6; j++ {
		record(s, "d", Observation{Where: -1}) // 7 > b's 5: d joins the top, b leaves it
	}
	s.mu.Lock()
	top := map[string]bool{}
	for k, e := range s.byKey {
		top[k.Digest] = e.top
	}
	s.mu.Unlock()
	if !top["a"] || !top["d"] || top["b"] || top["e"] {
		t.Fatalf("top after d overtook b: %v", top)
	}
	record(s, "f", Observation{Where: -1})
	record(s, "g", Observation{Where: -1}) // b and e were the LRU; both go before f and g
	if got := counts(s); got["a"] != 10 || got["d"] != 7 || got["f"] != 1 || got["g"] != 1 || len(got) != 4 {
		t.Fatalf("the top survives the LRU's turnover: %v", got)
	}
	s.Reset()
	if s.Len() != 0 {
		t.Fatalf("after Reset: %d digests", s.Len())
	}
}

// The figures of one digest: latencies, rows, errors, where answered,
// and the most common pass-through reason.
func TestStoreFigures(t *testing.T) {
	s := NewStore(10, 10, clock())
	for i := 1; i <= 100; i++ {
		o := Observation{At: time.Unix(int64(i), 0), Duration: time.Duration(i) * time.Millisecond, Rows: 2, Affected: 1, Where: atBackend, Pass: eval.NotSelect}
		switch {
		case i <= 10:
			o.Where, o.Pass = atMemory, eval.NoReason
		case i <= 15:
			o.Where, o.Pass = atResults, eval.NoReason
		case i <= 20:
			o.Pass = eval.TableNotCached
		case i == 100:
			o.Err = true
		}
		record(s, "x", o)
	}
	entries, _ := s.Snapshot()
	e := entries[0]
	if e.Count != 100 || e.RowsSent != 200 || e.RowsChanged != 100 || e.Errors != 1 ||
		e.Where != [numWhere]uint64{10, 5, 85} || e.TopPass() != eval.NotSelect {
		t.Fatalf("figures: %+v", e)
	}
	if e.Min != time.Millisecond || e.Max != 100*time.Millisecond || e.Sum != 5050*time.Millisecond {
		t.Fatalf("latencies: min %v max %v sum %v", e.Min, e.Max, e.Sum)
	}
	// The 99th of 1..100 ms is 99 ms: the histogram's bound is within 1/8 octave above.
	if p := e.P99(); p < 99*time.Millisecond || p > 100*time.Millisecond {
		t.Fatalf("p99 %v, want 99-100ms", p)
	}
	if e.First.IsZero() || !e.Last.After(e.First) {
		t.Fatalf("first %v, last %v", e.First, e.Last)
	}
}

// Every latency lands in a bucket whose bound is at most 1/8 octave above it.
func TestHistogramBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, 500 * time.Nanosecond, time.Microsecond, 7 * time.Microsecond,
		8 * time.Microsecond, 9 * time.Microsecond, 100 * time.Microsecond, 1234567 * time.Microsecond, time.Hour} {
		b := bucketOf(d)
		up := upperOf(b)
		if up <= d.Truncate(time.Microsecond) || float64(up) > float64(d)*1.126+float64(time.Microsecond) {
			t.Errorf("%v: bucket %d, bound %v", d, b, up)
		}
		if b > 0 && upperOf(b-1) > d {
			t.Errorf("%v: bucket %d, but the one below ends at %v", d, b, upperOf(b-1))
		}
	}
}

func TestStatementWords(t *testing.T) {
	for sql, want := range map[string]bool{"ADMIN RESET QUERY DIGESTS": true, " admin  reset query digests ; ": true,
		"ADMIN RESET QUERY": false, "ADMIN SHOW DDL JOBS": false} {
		if got := isResetDigests(sql); got != want {
			t.Errorf("isResetDigests(%q) = %v", sql, got)
		}
	}
	for _, c := range []struct {
		sql, db string
		want    string
	}{
		{"EXPLAIN CACHE t", "d", "d.t ok"},
		{"explain cache `a b`.`c``d`;", "", "a b.c`d ok"},
		{"EXPLAIN CACHE", "d", ". bad"},
		{"EXPLAIN CACHE a b", "d", ". bad"},
		{"EXPLAIN CACHE a.b.c", "d", ". bad"},
	} {
		name, ok := explainCacheTarget(c.sql)
		if !ok {
			t.Errorf("%q is not EXPLAIN CACHE", c.sql)
			continue
		}
		id, ok := parseTableName(name, c.db)
		verdict := "bad"
		if ok {
			verdict = "ok"
		}
		if got := fmt.Sprintf("%s.%s %s", id.Schema, id.Table, verdict); got != c.want {
			t.Errorf("%q: %s, want %s", c.sql, got, c.want)
		}
	}
	if _, ok := explainCacheTarget("EXPLAIN SELECT 1"); ok {
		t.Errorf("EXPLAIN SELECT taken for EXPLAIN CACHE")
	}
}

// Counting a statement of a known digest allocates nothing.
func TestRecordDoesNotAllocate(t *testing.T) {
	s := NewStore(10, 10, clock())
	k := Key{Digest: "d", Schema: "db", User: "u"}
	o := Observation{Duration: time.Millisecond, Where: atBackend, Pass: eval.NotSelect}
	s.Add(&Entry{Key: k}, &o)
	if n := testing.AllocsPerRun(1000, func() {
		o := Observation{Duration: time.Millisecond, Where: atBackend, Pass: eval.NotSelect, At: time.Now()}
		s.Record(k, &o)
	}); n != 0 {
		t.Errorf("Record allocates %v times a statement", n)
	}
}

// BenchmarkObserve is what the observer adds to a statement of a known
// digest (prepared, so its digest is kept with the statement): the
// outcome counted in the store, from 8 goroutines at once as from 8
// sessions.
func BenchmarkObserve(b *testing.B) {
	p, err := Open(nil, plugins.Env{}, "n1", "")
	if err != nil {
		b.Fatal(err)
	}
	st := &plugins.Statement{User: "u", DB: "db", Session: &plugins.SessionState{}}
	var m plugins.Memo
	st.ResetMemo(plugins.ComStmtExecute, "SELECT c FROM sbtest1 WHERE id=?", &m)
	out := &plugins.Outcome{Duration: 50 * time.Microsecond, Rows: 1}
	p.OnResult(st, out)
	b.SetParallelism(4) // 8 goroutines on 2 CPUs
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		st := &plugins.Statement{User: "u", DB: "db", Session: &plugins.SessionState{}}
		for pb.Next() {
			st.ResetMemo(plugins.ComStmtExecute, "SELECT c FROM sbtest1 WHERE id=?", &m)
			p.OnResult(st, out)
		}
	})
}

// BenchmarkObserveText is BenchmarkObserve for a text-protocol statement,
// whose digest is computed for each execution.
func BenchmarkObserveText(b *testing.B) {
	p, err := Open(nil, plugins.Env{}, "n1", "")
	if err != nil {
		b.Fatal(err)
	}
	st := &plugins.Statement{User: "u", DB: "db", Session: &plugins.SessionState{}}
	out := &plugins.Outcome{Duration: 50 * time.Microsecond, Rows: 1}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		st.Reset(plugins.ComQuery, "SELECT c FROM sbtest1 WHERE id=4211")
		p.OnResult(st, out)
	}
}

// A text statement's digest, looked up by its template, is TiDB's.
func TestDigestByTemplate(t *testing.T) {
	p, err := Open(nil, plugins.Env{}, "n1", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &plugins.Statement{Session: &plugins.SessionState{}}
	for _, sql := range []string{"SELECT c FROM t WHERE id = 1", "SELECT c FROM t WHERE id = 2",
		"SELECT c FROM t WHERE id IN (1, 2)", "SELECT c FROM t WHERE id IN (3, 4, 5)", "select c from t where s = 'x'",
		"SELECT c FROM t WHERE id = 1 /* c */", "SELECT c FROM t WHERE s = 'it''s'"} {
		for i := 0; i < 2; i++ { // computed, then looked up
			st.Reset(plugins.ComQuery, sql)
			got := p.digestOf(st)
			want := (&plugins.Statement{SQL: sql}).Digest()
			if got != want {
				t.Errorf("%q (%d): digest %s, want %s", sql, i, got, want)
			}
		}
	}
}
