package ddloffload

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

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
		newJobMetrics(p),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			p.log.Warn("ddl: metric not registered", "err", err)
		}
	}
}

// jobMetrics reports each unfinished job: its state (running, paused,
// throttled) and stage, rows done and estimated, rate and time left,
// labelled by job id and table.
type jobMetrics struct {
	p                                  *Plugin
	state, stage, done, est, rate, eta *prometheus.Desc
}

func newJobMetrics(p *Plugin) jobMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"job", "table"}, labels...), nil)
	}
	return jobMetrics{p: p,
		state: d("tableproxy_ddl_job_state", "1 for an unfinished job's state: running, paused or throttled (its copy held for the backend or its replicas).", "state"),
		stage: d("tableproxy_ddl_job_stage", "1 for an unfinished job's stage.", "stage"),
		done:  d("tableproxy_ddl_job_rows_done", "Rows an unfinished job has copied."),
		est:   d("tableproxy_ddl_job_rows_estimated", "Rows an unfinished job expects to copy."),
		rate:  d("tableproxy_ddl_job_rows_per_second", "An unfinished job's copy rate."),
		eta:   d("tableproxy_ddl_job_eta_seconds", "An unfinished job's time left copying, at its rate (0: not known)."),
	}
}

func (m jobMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.state, m.stage, m.done, m.est, m.rate, m.eta} {
		ch <- d
	}
}

func (m jobMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, j := range m.p.jobs.list() {
		if j.State != StateRunning && j.State != StatePaused && j.State != StateThrottled {
			continue
		}
		id, t := strconv.FormatInt(j.ID, 10), j.Schema+"."+j.Table
		ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, 1, id, t, j.State)
		ch <- prometheus.MustNewConstMetric(m.stage, prometheus.GaugeValue, 1, id, t, j.Stage)
		ch <- prometheus.MustNewConstMetric(m.done, prometheus.GaugeValue, float64(j.RowsDone), id, t)
		ch <- prometheus.MustNewConstMetric(m.est, prometheus.GaugeValue, float64(j.RowsEstimate), id, t)
		ch <- prometheus.MustNewConstMetric(m.rate, prometheus.GaugeValue, j.Rate, id, t)
		ch <- prometheus.MustNewConstMetric(m.eta, prometheus.GaugeValue, j.ETA.Seconds(), id, t)
	}
}
