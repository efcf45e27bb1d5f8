package ddloffload

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/plugins"
)

// The plugin's admin SQL: TiDB's ADMIN SHOW | CANCEL | PAUSE | RESUME DDL
// JOBS, and ADMIN DROP DDL KEPT TABLES [job_id, ...], which drops the
// originals that finished jobs keep (all of them, or those of the jobs
// listed) before their retention ends.

// dropKeptRE matches ADMIN DROP DDL KEPT TABLES, which TiDB's parser does
// not know; group 1 is the list of job ids, if any.
var dropKeptRE = regexp.MustCompile(`(?is)^\s*ADMIN\s+DROP\s+DDL\s+KEPT\s+TABLES((?:\s+\d+(?:\s*,\s*\d+)*)?)\s*;?\s*$`)

// admin answers the plugin's admin statements.
func (p *Plugin) admin(st *plugins.Statement) plugins.Action {
	if m := dropKeptRE.FindStringSubmatch(st.SQL); m != nil {
		if !st.Admin {
			return refuseNotAdmin()
		}
		var ids []int64
		for _, f := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return plugins.RefuseWith(mysql.NewError(mysql.ER_WRONG_ARGUMENTS, fmt.Sprintf("Incorrect job id %s", f)))
			}
			ids = append(ids, id)
		}
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			rs, err := plugins.TextResultset([]string{"JOB_ID", "KEPT_TABLE", "RESULT"}, p.dropKeptNow(ids))
			if err != nil {
				return w.WriteError(errJob("%v", err))
			}
			w.Rows(uint64(len(rs.Values)))
			return w.WriteResult(&mysql.Result{Resultset: rs})
		}))
	}
	if a, ok := p.adminComplete(st); ok {
		return a
	}
	stmts, err := st.Parsed()
	if err != nil || len(stmts) != 1 {
		return plugins.Continue
	}
	a, ok := stmts[0].(*ast.AdminStmt)
	if !ok {
		return plugins.Continue
	}
	var act func(int64) string
	switch a.Tp {
	case ast.AdminShowDDLJobs:
	case ast.AdminCancelDDLJobs:
		act = p.cancelJob
	case ast.AdminPauseDDLJobs:
		act = p.pauseJob
	case ast.AdminResumeDDLJobs:
		act = p.resumeJob
	default:
		return plugins.Continue
	}
	if !st.Admin {
		return refuseNotAdmin()
	}
	if act != nil {
		ids := slices.Clone(a.JobIDs)
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			rows := make([][]any, len(ids))
			for i, id := range ids {
				rows[i] = []any{id, act(id)}
			}
			rs, err := plugins.TextResultset([]string{"JOB_ID", "RESULT"}, rows)
			if err != nil {
				return w.WriteError(errJob("%v", err))
			}
			w.Rows(uint64(len(rows)))
			return w.WriteResult(&mysql.Result{Resultset: rs})
		}))
	}
	limit := a.JobNumber
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		rs, err := jobsResultset(p.jobs.list(), limit)
		if err != nil {
			return w.WriteError(errJob("%v", err))
		}
		w.Rows(uint64(len(rs.Values)))
		return w.WriteResult(&mysql.Result{Resultset: rs})
	}))
}

func refuseNotAdmin() plugins.Action {
	return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
		"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation"))
}

// dropKeptNow drops the kept originals of the finished jobs ids (every
// finished job's, if none is given), and says for each what became of it.
func (p *Plugin) dropKeptNow(ids []int64) [][]any {
	var recs []*jobRec
	if len(ids) == 0 {
		for _, rec := range p.jobs.records() {
			if j := rec.snapshot(); j.KeptTable() != "" && j.State != StateRunning {
				recs = append(recs, rec)
			}
		}
		slices.SortFunc(recs, func(a, b *jobRec) int { return int(a.snapshot().ID - b.snapshot().ID) })
	}
	rows := [][]any{}
	for _, id := range ids {
		rec := p.jobs.get(id)
		switch {
		case rec == nil:
			rows = append(rows, []any{id, nil, fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)})
		case rec.snapshot().State == StateRunning:
			rows = append(rows, []any{id, nil, fmt.Sprintf("error: job %d is running; its original is kept once it ends", id)})
		case rec.snapshot().KeptTable() == "":
			rows = append(rows, []any{id, nil, fmt.Sprintf("error: job %d keeps no table", id)})
		default:
			recs = append(recs, rec)
		}
	}
	for _, rec := range recs {
		j := rec.snapshot()
		result := "dropped"
		if err := p.dropKept(rec); err != nil {
			result = "error: " + err.Error()
		}
		rows = append(rows, []any{j.ID, j.KeptTable(), result})
	}
	return rows
}

// cancelJob cancels a running job, as ADMIN CANCEL DDL JOBS reports it
// (TiDB's wording). A job stops at its next check, drops its shadow, and
// its client gets error 1317; a job that has already swapped its table in
// cannot be cancelled.
func (p *Plugin) cancelJob(id int64) string {
	return p.changeRunningJob(id, "cancelled", func(rec *jobRec) string {
		switch {
		case rec.job.State != StateRunning || rec.cancel == nil:
			return fmt.Sprintf("error: [ddl:8225]This job:%d is finished, so can't be cancelled", id)
		case rec.swapped != nil && rec.swapped.Load():
			return fmt.Sprintf("error: [ddl:8225]This job:%d has swapped its table in, so can't be cancelled", id)
		case rec.cancelled.Load():
			return fmt.Sprintf("error: [ddl:8226]This job:%d is almost finished, can't be cancelled now", id)
		}
		rec.cancelled.Store(true)
		rec.job.CancelRequested = true
		rec.cancel()
		return ""
	})
}

// pauseJob pauses a running job at its next check, before its cut-over.
func (p *Plugin) pauseJob(id int64) string {
	return p.changeRunningJob(id, "paused", func(rec *jobRec) string {
		switch {
		case rec.job.State != StateRunning || rec.cancel == nil:
			return fmt.Sprintf("error: [ddl:8225]This job:%d is finished, so can't be paused", id)
		case Stage(rec.stage.Load()) == StageNative:
			return fmt.Sprintf("error: [ddl:8226]This job:%d runs the backend's own ALTER, can't be paused", id)
		case Stage(rec.stage.Load()) >= StageCutOver:
			return fmt.Sprintf("error: [ddl:8226]This job:%d is swapping its table in, can't be paused now", id)
		}
		rec.gate.pause()
		rec.job.Paused = true
		return ""
	})
}

// changeRunningJob applies change to a job under its lock; change returns
// the refusal to report, or "" once it has changed the job. The change is
// then recorded, so that a proxy stopped right after it finds it at its
// next start (a cancelled job is rolled back, not resumed; a paused one
// stays paused).
func (p *Plugin) changeRunningJob(id int64, done string, change func(*jobRec) string) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	rec.mu.Lock()
	msg := change(rec)
	rec.mu.Unlock()
	if msg != "" {
		return msg
	}
	p.persist()
	p.log.Info("ddl: job "+done, "job", id)
	return "successful"
}

// resumeJob resumes a paused job.
func (p *Plugin) resumeJob(id int64) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	if !rec.gate.resume() {
		return fmt.Sprintf("error: [ddl:8260]Job %d can't be resumed: it is not paused", id)
	}
	_ = p.jobs.update(rec, func(j *Job) { j.Paused = false })
	p.log.Info("ddl: job resumed", "job", id)
	return "successful"
}

// jobsColumns are ADMIN SHOW DDL JOBS's columns: TiDB's names where TiDB has
// the column.
var jobsColumns = []string{"JOB_ID", "DB_NAME", "TABLE_NAME", "JOB_TYPE", "STATE", "STAGE",
	"ROW_COUNT", "ROWS_ESTIMATED", "RATE", "ETA", "START_TIME", "END_TIME", "QUERY", "ERROR",
	"STRATEGY", "STRATEGY_REASON", "KEPT_TABLE", "KEPT_UNTIL", "CUT_OVER", "BLOCKED_BY"}

func jobsResultset(jobs []Job, limit int64) (*mysql.Resultset, error) {
	if limit > 0 && int64(len(jobs)) > limit {
		jobs = jobs[:limit]
	}
	rows := make([][]any, 0, len(jobs))
	ts := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.Local().Format("2006-01-02 15:04:05")
	}
	for _, j := range jobs {
		var eta any
		if j.ETA > 0 {
			eta = j.ETA.Round(time.Second).String()
		}
		var kept any
		if k := j.KeptTable(); k != "" {
			kept = k
		}
		rows = append(rows, []any{j.ID, j.Schema, j.Table, j.Type, j.State, j.Stage,
			j.RowsDone, j.RowsEstimate, int64(j.Rate), eta, ts(j.Start), ts(j.End), j.Query, j.Error,
			j.Strategy, j.StrategyReason, kept, ts(j.DropOldAt), j.cutOverState(), j.blockedBy()})
	}
	if len(rows) == 0 {
		// go-mysql needs a row to type the columns; send the header only.
		rs, err := plugins.TextResultset(jobsColumns, [][]any{{int64(0), "", "", "", "", "", int64(0), int64(0), int64(0), "", "", "", "", "", "", "", "", "", "", ""}})
		if err != nil {
			return nil, err
		}
		rs.Values, rs.RowDatas = nil, nil
		return rs, nil
	}
	return plugins.TextResultset(jobsColumns, rows)
}
