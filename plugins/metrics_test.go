package plugins

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// findMetric returns the series of family name whose labels are exactly the
// given name/value pairs, or nil.
func findMetric(t *testing.T, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("findMetric: odd label list %q", labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels)/2 {
				continue
			}
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

// metricValue returns the value of a counter or gauge series, failing the
// test when the series does not exist.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m := findMetric(t, g, name, labels...)
	if m == nil {
		t.Fatalf("no series %s%q", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("series %s%q is neither counter nor gauge", name, labels)
	return 0
}

func buildMetrics(t *testing.T, opts Options, reg prometheus.Registerer) *metricsPlugin {
	t.Helper()
	f, ok := lookup("metrics")
	if !ok {
		t.Fatal("metrics is not registered")
	}
	p, err := f(opts, Env{Metrics: reg})
	if err != nil {
		t.Fatalf("build metrics: %v", err)
	}
	return p.(*metricsPlugin)
}

func stmt(cmd Command, sql string) *Statement {
	st := &Statement{ConnID: 7, User: "app", DB: "shop"}
	st.Reset(cmd, sql)
	return st
}

func TestMetricsStatements(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)

	sel := stmt(ComQuery, "SELECT * FROM t WHERE id = 1")
	for range 3 {
		m.OnResult(sel, &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend, Rows: 2})
	}
	m.OnResult(sel, &Outcome{Duration: 20 * time.Microsecond, Source: FromPlugin, Plugin: "cache", Rows: 1})
	m.OnResult(stmt(ComStmtPrepare, "UPDATE t SET a = ? WHERE id = ?"), &Outcome{Duration: time.Millisecond, Source: FromBackend})
	m.OnResult(stmt(ComStmtExecute, "UPDATE t SET a = ? WHERE id = ?"), &Outcome{Duration: time.Millisecond, Source: FromBackend, AffectedRows: 1})
	m.OnResult(stmt(ComQuery, "DROP TABLE t"), &Outcome{Source: FromProxy, Plugin: "firewall",
		Err: &mysql.MyError{Code: 1045, State: "28000", Message: "denied"}})

	checks := []struct {
		labels []string
		want   float64
	}{
		{[]string{"kind", "select", "command", "query", "source", "backend"}, 3},
		{[]string{"kind", "select", "command", "query", "source", "plugin"}, 1},
		{[]string{"kind", "update", "command", "prepare", "source", "backend"}, 1},
		{[]string{"kind", "update", "command", "execute", "source", "backend"}, 1},
		{[]string{"kind", "ddl", "command", "query", "source", "proxy"}, 1},
		{[]string{"kind", "insert", "command", "query", "source", "backend"}, 0},
	}
	for _, c := range checks {
		if got := metricValue(t, reg, "tableproxy_statements_total", c.labels...); got != c.want {
			t.Errorf("statements_total%q = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := metricValue(t, reg, "tableproxy_statement_rows_total"); got != 7 {
		t.Errorf("rows_total = %v, want 7", got)
	}
	if got := metricValue(t, reg, "tableproxy_statement_errors_total", "source", "proxy"); got != 1 {
		t.Errorf("statement_errors_total{proxy} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "tableproxy_statement_errors_total", "source", "backend"); got != 0 {
		t.Errorf("statement_errors_total{backend} = %v, want 0", got)
	}
	// A refusal by the proxy is not a backend error.
	if m := findMetric(t, reg, "tableproxy_backend_errors_total", "code", "1045"); m != nil {
		t.Errorf("proxy error counted as backend error: %v", m)
	}
}

func TestMetricsDurationBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)
	sel := stmt(ComQuery, "SELECT 1")
	m.OnResult(sel, &Outcome{Duration: 20 * time.Microsecond, Source: FromPlugin})   // a cached read
	m.OnResult(sel, &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend}) // a point select
	m.OnResult(sel, &Outcome{Duration: 30 * time.Second, Source: FromBackend})       // beyond the top

	if mem := findMetric(t, reg, "tableproxy_statement_duration_seconds", "kind", "select", "source", "plugin"); mem.GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("reads answered from memory: %d samples, want 1", mem.GetHistogram().GetSampleCount())
	}
	hm := findMetric(t, reg, "tableproxy_statement_duration_seconds", "kind", "select", "source", "backend")
	if hm == nil || hm.Histogram == nil {
		t.Fatal("no duration histogram for kind select")
	}
	h := hm.Histogram
	if h.GetSampleCount() != 2 {
		t.Fatalf("sample count = %d, want 2", h.GetSampleCount())
	}
	if want := 30.00015; h.GetSampleSum() < want-1e-9 || h.GetSampleSum() > want+1e-9 {
		t.Errorf("sample sum = %v, want %v", h.GetSampleSum(), want)
	}
	bounds := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		bounds[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for _, c := range []struct {
		le   float64
		want uint64
	}{
		{0.00005, 0}, // (the cached read is under source plugin)
		{0.0001, 0},
		{0.00025, 1}, // the point select falls below 250 µs
		{10, 1},
	} {
		got, ok := bounds[c.le]
		if !ok {
			t.Errorf("no bucket le=%v in %v", c.le, bounds)
			continue
		}
		if got != c.want {
			t.Errorf("bucket le=%v = %d, want %d", c.le, got, c.want)
		}
	}
	if len(bounds) != len(defaultDurationBuckets) {
		t.Errorf("%d buckets, want %d", len(bounds), len(defaultDurationBuckets))
	}
}

func TestMetricsBackendErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)
	ins := stmt(ComQuery, "INSERT INTO t VALUES (1)")
	dup := &mysql.MyError{Code: mysql.ER_DUP_ENTRY, State: "23000", Message: "Duplicate entry"}
	for range 2 {
		m.OnResult(ins, &Outcome{Source: FromBackend, Err: dup})
	}
	m.OnResult(stmt(ComQuery, "SELECT * FROM nope"), &Outcome{Source: FromBackend,
		Err: &mysql.MyError{Code: mysql.ER_NO_SUCH_TABLE, State: "42S02"}})
	m.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{Source: FromPlugin,
		Err: &mysql.MyError{Code: 1105, State: "HY000"}})

	if got := metricValue(t, reg, "tableproxy_backend_errors_total", "code", "1062"); got != 2 {
		t.Errorf("backend_errors_total{1062} = %v, want 2", got)
	}
	if got := metricValue(t, reg, "tableproxy_backend_errors_total", "code", "1146"); got != 1 {
		t.Errorf("backend_errors_total{1146} = %v, want 1", got)
	}
	if m := findMetric(t, reg, "tableproxy_backend_errors_total", "code", "1105"); m != nil {
		t.Error("a plugin's error was counted as a backend error")
	}
	if got := metricValue(t, reg, "tableproxy_statement_errors_total", "source", "backend"); got != 3 {
		t.Errorf("statement_errors_total{backend} = %v, want 3", got)
	}
	if got := metricValue(t, reg, "tableproxy_statement_errors_total", "source", "plugin"); got != 1 {
		t.Errorf("statement_errors_total{plugin} = %v, want 1", got)
	}
}

func TestMetricsConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)
	for id := uint32(1); id <= 3; id++ {
		m.OnConn(ConnEvent{Kind: ConnOpened, ConnID: id, User: "app"})
	}
	m.OnConn(ConnEvent{Kind: ConnClosed, ConnID: 2})
	m.OnConn(ConnEvent{Kind: ConnRejected, Err: &mysql.MyError{Code: 1045}})
	m.OnConn(ConnEvent{Kind: ConnRejected, Err: &mysql.MyError{Code: 1040}})

	for ev, want := range map[string]float64{"opened": 3, "closed": 1, "rejected": 2} {
		if got := metricValue(t, reg, "tableproxy_connections_total", "event", ev); got != want {
			t.Errorf("connections_total{%s} = %v, want %v", ev, got, want)
		}
	}
	if got := metricValue(t, reg, "tableproxy_connections_active"); got != 2 {
		t.Errorf("connections_active = %v, want 2", got)
	}
}

func TestMetricsOddValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)
	st := stmt(Command(mysql.COM_FIELD_LIST), "t")
	st.Kind = Kind(200) // out of range: counted as other, not a panic
	m.OnResult(st, &Outcome{Source: Source(9)})
	if got := metricValue(t, reg, "tableproxy_statements_total", "kind", "other", "command", "command(4)", "source", "proxy"); got != 1 {
		t.Errorf("odd statement counted %v times, want 1", got)
	}
}

func TestMetricsOptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, Options{"buckets": []any{0.001, 0.01, 0.1}}, reg)
	m.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{Duration: 5 * time.Millisecond})
	h := findMetric(t, reg, "tableproxy_statement_duration_seconds", "kind", "select", "source", "backend").GetHistogram()
	if n := len(h.GetBucket()); n != 3 {
		t.Errorf("%d buckets, want the 3 configured", n)
	}

	f, _ := lookup("metrics")
	for _, c := range []struct {
		opts Options
		env  Env
		want string
	}{
		{Options{"buckets": []any{0.1, 0.01}}, Env{Metrics: prometheus.NewRegistry()}, "buckets[1]"},
		{Options{"buckets": []any{0, 1}}, Env{Metrics: prometheus.NewRegistry()}, "buckets[0]"},
		{Options{"buckets": []any{}}, Env{Metrics: prometheus.NewRegistry()}, "buckets"},
		{Options{"bukets": []any{1}}, Env{Metrics: prometheus.NewRegistry()}, `"bukets"`},
		{nil, Env{}, "registry"},
	} {
		_, err := f(c.opts, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %v: error %v, want one mentioning %s", c.opts, err, c.want)
		}
	}
}

// Building the plugin twice on one registry (a second chain, a reload) must
// not fail, and both instances must feed the same series.
func TestMetricsRebuildSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := buildMetrics(t, nil, reg)
	b := buildMetrics(t, nil, reg)
	a.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	b.OnResult(stmt(ComQuery, "SELECT 1"), &Outcome{})
	a.OnConn(ConnEvent{Kind: ConnOpened})
	b.OnConn(ConnEvent{Kind: ConnOpened})
	if got := metricValue(t, reg, "tableproxy_statements_total", "kind", "select", "command", "query", "source", "backend"); got != 2 {
		t.Errorf("statements_total = %v, want 2", got)
	}
	if got := metricValue(t, reg, "tableproxy_connections_active"); got != 2 {
		t.Errorf("connections_active = %v, want 2", got)
	}
}

func TestMetricsOnResultDoesNotAllocate(t *testing.T) {
	m := buildMetrics(t, nil, prometheus.NewRegistry())
	st := stmt(ComStmtExecute, "SELECT c FROM sbtest1 WHERE id = ?")
	ok := &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend, Rows: 1}
	bad := &Outcome{Duration: time.Millisecond, Source: FromBackend, Err: &mysql.MyError{Code: 1213, State: "40001"}}
	m.OnResult(st, bad) // the first error of a code may allocate its series
	for name, out := range map[string]*Outcome{"success": ok, "backend error": bad} {
		if n := testing.AllocsPerRun(1000, func() { m.OnResult(st, out) }); n != 0 {
			t.Errorf("OnResult (%s) allocates %v times per call", name, n)
		}
	}
	ev := ConnEvent{Kind: ConnOpened}
	if n := testing.AllocsPerRun(1000, func() { m.OnConn(ev) }); n != 0 {
		t.Errorf("OnConn allocates %v times per call", n)
	}
}

func TestMetricsConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := buildMetrics(t, nil, reg)
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stmt(ComQuery, "SELECT 1")
			for i := range each {
				// New error codes appear concurrently with reads of the map.
				code := uint16(1000 + (w*each+i)%50)
				m.OnResult(st, &Outcome{Source: FromBackend, Rows: 1, Err: &mysql.MyError{Code: code}})
			}
		}()
	}
	wg.Wait()
	if got := metricValue(t, reg, "tableproxy_statement_rows_total"); got != workers*each {
		t.Errorf("rows_total = %v, want %d", got, workers*each)
	}
	total := 0.0
	for c := 1000; c < 1050; c++ {
		total += metricValue(t, reg, "tableproxy_backend_errors_total", "code", strconv.Itoa(c))
	}
	if total != workers*each {
		t.Errorf("backend errors total %v, want %d", total, workers*each)
	}
}

func BenchmarkMetricsOnResult(b *testing.B) {
	m, err := newMetricsPlugin(prometheus.NewRegistry(), defaultDurationBuckets)
	if err != nil {
		b.Fatal(err)
	}
	st := stmt(ComStmtExecute, "SELECT c FROM sbtest1 WHERE id = ?")
	out := &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend, Rows: 1}
	b.ReportAllocs()
	for b.Loop() {
		m.OnResult(st, out)
	}
}

// The same with every core counting into the same series, as sessions do.
func BenchmarkMetricsOnResultParallel(b *testing.B) {
	m, err := newMetricsPlugin(prometheus.NewRegistry(), defaultDurationBuckets)
	if err != nil {
		b.Fatal(err)
	}
	out := &Outcome{Duration: 150 * time.Microsecond, Source: FromBackend, Rows: 1}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		st := stmt(ComStmtExecute, "SELECT c FROM sbtest1 WHERE id = ?")
		for pb.Next() {
			m.OnResult(st, out)
		}
	})
}
