package ddloffload

import (
	"strconv"
	"time"
)

// JobsTable is tableproxy.ddl_jobs: every job the proxy knows, newest
// first, as ADMIN SHOW DDL JOBS lists them, for any client to query and
// filter (the virtual schema answers it, whatever plugins are on). Unlike the
// admin statement it needs no admin privilege: it shows what runs, as
// information_schema.PROCESSLIST does.
type JobsTable struct{ p *Plugin }

// JobsTable returns the plugin's tableproxy.ddl_jobs.
func (p *Plugin) JobsTable() JobsTable { return JobsTable{p} }

var jobsTableColumns = []string{"job_id", "db_name", "table_name", "job_type", "state", "stage",
	"row_count", "rows_estimated", "progress", "rate", "eta_seconds", "start_time", "end_time", "query", "error",
	"strategy", "strategy_reason", "kept_table", "kept_until", "cut_over", "blocked_by",
	"replica_lag_max_ms", "lag_holds", "lag_held_seconds", "replicas"}

// Columns names the table's columns.
func (JobsTable) Columns() []string { return jobsTableColumns }

// Numeric marks the BIGINT columns; the others are VARCHAR.
func (JobsTable) Numeric() map[string]bool {
	return map[string]bool{"job_id": true, "row_count": true, "rows_estimated": true, "rate": true, "eta_seconds": true,
		"replica_lag_max_ms": true, "lag_holds": true}
}

// Rows lists the jobs. Times are UTC; progress is the job's overall
// percent done with one decimal; eta_seconds is -1 when unknown;
// kept_table is the original a finished job keeps (see cleanup.go) until
// kept_until, "" when there is none; cut_over and blocked_by as ADMIN SHOW
// DDL JOBS shows them (complete.go, cutover.go); the replicas' lag as the
// throttle read it (replicas.go): the most seen in milliseconds, how many
// times and for how many seconds it held the copy, and each replica's
// state.
func (t JobsTable) Rows() [][]any {
	ts := func(v time.Time) string {
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04:05")
	}
	jobs := t.p.jobs.list()
	rows := make([][]any, 0, len(jobs))
	for _, j := range jobs {
		eta := int64(-1)
		if j.ETA > 0 {
			eta = int64(j.ETA.Round(time.Second) / time.Second)
		}
		rows = append(rows, []any{j.ID, j.Schema, j.Table, j.Type, j.State, j.Stage, j.RowsDone, j.RowsEstimate,
			formatPercent(j.Progress()), int64(j.Rate), eta, ts(j.Start), ts(j.End), j.Query, j.Error,
			j.Strategy, j.StrategyReason, j.KeptTable(), ts(j.DropOldAt), j.cutOverState(), j.blockedBy(),
			j.ReplicaLagMaxMs, int64(j.LagHolds), strconv.FormatFloat(j.LagHeldSeconds, 'f', 1, 64), j.Replicas})
	}
	return rows
}
