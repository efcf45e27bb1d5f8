package ddloffload

import "github.com/prometheus/client_golang/prometheus"

// registerMetrics exposes the jobs' counters, read from the registry when
// scraped.
func (p *Plugin) registerMetrics(reg prometheus.Registerer) {
	byState := func(state string) func() float64 {
		return func() float64 {
			n := 0
			for _, j := range p.jobs.list() {
				if j.State == state {
					n++
				}
			}
			return float64(n)
		}
	}
	rows := func() float64 {
		var n int64
		for _, j := range p.jobs.list() {
			n += j.RowsDone
		}
		return float64(n)
	}
	collectors := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_ddl_jobs_running",
			Help: "ADD INDEX jobs running."}, byState(StateRunning)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_ddl_jobs_done",
			Help: "ADD INDEX jobs listed as done (of those kept, see keep_jobs)."}, byState(StateDone)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_ddl_jobs_failed",
			Help: "ADD INDEX jobs listed as failed (of those kept)."}, byState(StateFailed)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_ddl_jobs_cancelled",
			Help: "ADD INDEX jobs listed as cancelled (of those kept)."}, byState(StateCancelled)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_ddl_rows_copied",
			Help: "Rows copied by the jobs kept in the list."}, rows),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_ddl_statements_held_total",
			Help: "Statements held at the proxy during cut-overs."}, func() float64 { return float64(p.fence.held.Load()) }),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			p.log.Warn("ddl: metric not registered", "err", err)
		}
	}
}
