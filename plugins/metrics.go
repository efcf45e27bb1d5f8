package plugins

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// defaultDurationBuckets are the statement latency buckets, in seconds. A
// read answered from a cached table takes about 20 µs and a backend point
// select about 150 µs, so the low end is fine-grained; the top catches
// runaway statements.
var defaultDurationBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Sources and commands, as array sizes and indexes for the metric tables.
const (
	numSources  = int(FromProxy) + 1
	numCommands = 3
)

// commandIndex maps the commands a Statement can carry to 0..numCommands-1,
// and anything else to -1.
func commandIndex(c Command) int {
	switch c {
	case ComQuery:
		return 0
	case ComStmtPrepare:
		return 1
	case ComStmtExecute:
		return 2
	}
	return -1
}

var knownCommands = [numCommands]Command{ComQuery, ComStmtPrepare, ComStmtExecute}

type metricsOptions struct {
	Buckets []float64 `json:"buckets"` // seconds, strictly increasing
}

// metricsPlugin exports Prometheus metrics about statements and connections.
//
// OnResult runs for every statement, so every child it touches is resolved
// once at build time into arrays indexed by Kind, Command and Source: the
// per-statement cost is a few atomic adds, with no label hashing and no
// allocation. Only backend error codes, an open set, are resolved at run time.
type metricsPlugin struct {
	connOpened, connClosed, connRejected prometheus.Counter
	connActive                           prometheus.Gauge

	statementsVec *prometheus.CounterVec // for commands outside knownCommands
	statements    [NumKinds][numCommands][numSources]prometheus.Counter
	durations     [NumKinds][numSources]prometheus.Observer
	stmtErrors    [numSources]prometheus.Counter
	rows          prometheus.Counter

	backendErrVec *prometheus.CounterVec
	// backendErrs is a copy-on-write map from error code to counter: reads
	// load it without a lock (and without boxing the key, as a sync.Map
	// would for codes above 255); the rare new code copies it under mu.
	backendErrs atomic.Pointer[map[uint16]prometheus.Counter]
	mu          sync.Mutex
}

func newMetrics(opts Options, env Env) (Plugin, error) {
	var o metricsOptions
	if err := DecodeOptions(opts, &o); err != nil {
		return nil, err
	}
	buckets := defaultDurationBuckets
	if o.Buckets != nil {
		if len(o.Buckets) == 0 {
			return nil, fmt.Errorf("buckets: empty list (omit it for the defaults)")
		}
		for i, b := range o.Buckets {
			if b <= 0 {
				return nil, fmt.Errorf("buckets[%d]: %g is not a positive number of seconds", i, b)
			}
			if i > 0 && b <= o.Buckets[i-1] {
				return nil, fmt.Errorf("buckets[%d]: %g does not follow %g: buckets must increase", i, b, o.Buckets[i-1])
			}
		}
		buckets = o.Buckets
	}
	if env.Metrics == nil {
		return nil, errors.New("no metrics registry to register on (is the metrics listener configured?)")
	}
	return newMetricsPlugin(env.Metrics, buckets)
}

func newMetricsPlugin(reg prometheus.Registerer, buckets []float64) (*metricsPlugin, error) {
	conns, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tableproxy_connections_total",
		Help: "Client connections by event: opened (authenticated and bound to a backend), closed, rejected.",
	}, []string{"event"}))
	if err != nil {
		return nil, err
	}
	active, err := registerOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tableproxy_connections_active",
		Help: "Client connections currently open.",
	}))
	if err != nil {
		return nil, err
	}
	stmts, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tableproxy_statements_total",
		Help: "Statements by kind (first keyword), protocol command and who answered them.",
	}, []string{"kind", "command", "source"}))
	if err != nil {
		return nil, err
	}
	durs, err := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tableproxy_statement_duration_seconds",
		Help:    "Time from receiving a statement to the end of its answer, by kind and by who answered (backend; plugin: the cache, from memory; proxy).",
		Buckets: buckets,
	}, []string{"kind", "source"}))
	if err != nil {
		return nil, err
	}
	stmtErrs, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tableproxy_statement_errors_total",
		Help: "Statements answered with an error, by who produced the error.",
	}, []string{"source"}))
	if err != nil {
		return nil, err
	}
	backendErrs, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tableproxy_backend_errors_total",
		Help: "Errors returned by the backend, by MySQL error number.",
	}, []string{"code"}))
	if err != nil {
		return nil, err
	}
	rows, err := registerOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tableproxy_statement_rows_total",
		Help: "Result-set rows sent to clients.",
	}))
	if err != nil {
		return nil, err
	}

	m := &metricsPlugin{
		connOpened:    conns.WithLabelValues(ConnOpened.String()),
		connClosed:    conns.WithLabelValues(ConnClosed.String()),
		connRejected:  conns.WithLabelValues(ConnRejected.String()),
		connActive:    active,
		statementsVec: stmts,
		rows:          rows,
		backendErrVec: backendErrs,
	}
	for k := range NumKinds {
		kind := Kind(k).String()
		for src := range numSources {
			m.durations[k][src] = durs.WithLabelValues(kind, Source(src).String())
		}
		for c, cmd := range knownCommands {
			for s := range numSources {
				m.statements[k][c][s] = stmts.WithLabelValues(kind, cmd.String(), Source(s).String())
			}
		}
	}
	for s := range numSources {
		m.stmtErrors[s] = stmtErrs.WithLabelValues(Source(s).String())
	}
	empty := map[uint16]prometheus.Counter{}
	m.backendErrs.Store(&empty)
	return m, nil
}

// registerOrReuse registers c, or returns the collector already registered
// under the same description (so that a chain rebuilt on the same registry,
// or a second instance of a plugin, shares its metrics instead of failing).
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("registering metrics: %w", err)
}

func (m *metricsPlugin) Name() string { return "metrics" }

// OnResult counts the statement. It does not allocate.
func (m *metricsPlugin) OnResult(st *Statement, out *Outcome) {
	k := st.Kind
	if k >= numKinds {
		k = KindOther
	}
	src := out.Source
	if src > FromProxy {
		src = FromProxy // Source.String names every unknown source "proxy"
	}
	if c := commandIndex(st.Command); c >= 0 {
		m.statements[k][c][src].Inc()
	} else {
		m.statementsVec.WithLabelValues(k.String(), st.Command.String(), src.String()).Inc()
	}
	m.durations[k][src].Observe(out.Duration.Seconds())
	if out.Rows > 0 {
		m.rows.Add(float64(out.Rows))
	}
	if out.Err != nil {
		m.stmtErrors[src].Inc()
		if src == FromBackend {
			m.backendError(out.Err.Code).Inc()
		}
	}
}

func (m *metricsPlugin) backendError(code uint16) prometheus.Counter {
	if c, ok := (*m.backendErrs.Load())[code]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.backendErrs.Load()
	if c, ok := old[code]; ok {
		return c
	}
	next := make(map[uint16]prometheus.Counter, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	c := m.backendErrVec.WithLabelValues(strconv.Itoa(int(code)))
	next[code] = c
	m.backendErrs.Store(&next)
	return c
}

// OnConn counts connection events and keeps the active gauge.
func (m *metricsPlugin) OnConn(ev ConnEvent) {
	switch ev.Kind {
	case ConnOpened:
		m.connOpened.Inc()
		m.connActive.Inc()
	case ConnClosed:
		m.connClosed.Inc()
		m.connActive.Dec()
	case ConnRejected:
		m.connRejected.Inc()
	}
}
