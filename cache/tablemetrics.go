package cache

import "github.com/prometheus/client_golang/prometheus"

// tableMetrics reports each cached table's state, copy size, version
// and reads, labelled by table (schema.table): few tables are cached, so
// the series are few.
type tableMetrics struct {
	p                           *Plugin
	state, bytes, rows, version *prometheus.Desc
	hits, passes                *prometheus.Desc
}

func newTableMetrics(p *Plugin) tableMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"table"}, labels...), nil)
	}
	return tableMetrics{p: p,
		state:   d("tableproxy_cache_table_state", "1 for a cached table's state: ready, stale, loading, failed, dropped.", "state"),
		bytes:   d("tableproxy_cache_table_memory_bytes", "The memory of a cached table's copy."),
		rows:    d("tableproxy_cache_table_rows", "The rows of a cached table's copy."),
		version: d("tableproxy_cache_table_version", "A cached table's version (it moves with every write)."),
		hits:    d("tableproxy_cache_table_hits_total", "Reads of a cached table answered from memory."),
		passes:  d("tableproxy_cache_table_passes_total", "Reads of a cached table sent to the backend."),
	}
}

func (m tableMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.state, m.bytes, m.rows, m.version, m.hits, m.passes} {
		ch <- d
	}
}

func (m tableMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, st := range m.p.Tables() {
		t := st.Schema + "." + st.Table
		ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, 1, t, st.State)
		if st.State == "dropped" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(st.Bytes), t)
		ch <- prometheus.MustNewConstMetric(m.rows, prometheus.GaugeValue, float64(st.Rows), t)
		ch <- prometheus.MustNewConstMetric(m.version, prometheus.GaugeValue, float64(st.Version), t)
		ch <- prometheus.MustNewConstMetric(m.hits, prometheus.CounterValue, float64(st.Hits), t)
		ch <- prometheus.MustNewConstMetric(m.passes, prometheus.CounterValue, float64(st.Passes), t)
	}
}
