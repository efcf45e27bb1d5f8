package ddloffload

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// Completion on the DBA's word. A job started with
// tableproxy_ddl_postpone_cutover = ON copies, builds and verifies, then
// waits at its cut-over, "ready to cut over", until ADMIN COMPLETE DDL
// JOBS id says go, now or AT a time. While it waits it keeps the shadow
// up with the binary log (a catch-up every readyCatchUpEvery, in small
// batches, never one long transaction) and verifies it again every
// readyVerifyEvery (range by range, throttled as the copy is), so that
// the swap, when it comes, is as brief as an unpostponed job's.

const (
	readyCatchUpEvery = time.Second
	readyVerifyEvery  = 5 * time.Minute
)

// completeRE matches ADMIN COMPLETE DDL JOBS id[, id ...] [AT 'time'],
// which TiDB's parser does not know.
var completeRE = regexp.MustCompile(`(?is)^\s*ADMIN\s+COMPLETE\s+DDL\s+JOBS\s+(\d+(?:\s*,\s*\d+)*)(?:\s+AT\s+'([^']*)')?\s*;?\s*$`)

// completeTimeLayouts are the forms AT accepts: the proxy's local time
// (as ADMIN SHOW DDL JOBS prints times), or one with an offset.
var completeTimeLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04", time.RFC3339, "2006-01-02 15:04:05Z07:00"}

// parseCompleteAt reads AT's time.
func parseCompleteAt(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range completeTimeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("Incorrect datetime value: '%s' (want 'YYYY-MM-DD HH:MM:SS', the proxy's local time, or RFC 3339 with an offset)", s)
}

// adminComplete answers ADMIN COMPLETE DDL JOBS, or returns ok == false
// for other statements.
func (p *Plugin) adminComplete(st *plugins.Statement) (plugins.Action, bool) {
	m := completeRE.FindStringSubmatch(st.SQL)
	if m == nil {
		return plugins.Continue, false
	}
	if !st.Admin {
		return refuseNotAdmin(), true
	}
	var at time.Time
	if m[2] != "" {
		t, err := parseCompleteAt(m[2])
		if err != nil {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_TRUNCATED_WRONG_VALUE, err.Error())), true
		}
		at = t
	}
	var ids []int64
	for _, f := range strings.Split(m[1], ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_WRONG_ARGUMENTS, fmt.Sprintf("Incorrect job id %s", f))), true
		}
		ids = append(ids, id)
	}
	user := strings.Clone(st.User)
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		rows := make([][]any, len(ids))
		for i, id := range ids {
			rows[i] = []any{id, p.completeJob(id, at, user)}
		}
		rs, err := plugins.TextResultset([]string{"JOB_ID", "RESULT"}, rows)
		if err != nil {
			return w.WriteError(errJob("%v", err))
		}
		w.Rows(uint64(len(rows)))
		return w.WriteResult(&mysql.Result{Resultset: rs})
	})), true
}

// completeJob gives a postponed job the word to cut over, now (at zero) or
// at at, and says what became of it as the RESULT column does.
func (p *Plugin) completeJob(id int64, at time.Time, user string) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	j := rec.snapshot()
	switch {
	case j.State == StateDone || j.State == StateFailed || j.State == StateCancelled:
		return fmt.Sprintf("error: job %d has ended (%s)", id, j.State)
	case !j.Checkpoint.Settings.PostponeCutOver:
		return fmt.Sprintf("error: job %d does not wait for completion: it cuts over as soon as it is ready", id)
	case j.CompleteRequested:
		return fmt.Sprintf("error: job %d is already completing", id)
	}
	if err := p.jobs.update(rec, func(j *Job) {
		if at.IsZero() || !at.After(time.Now()) {
			j.CompleteRequested, j.CompleteAt = true, time.Time{}
		} else {
			j.CompleteAt = at
		}
	}); err != nil {
		return "error: " + err.Error()
	}
	rec.wakeUp()
	if !at.IsZero() && at.After(time.Now()) {
		p.log.Info("ddl: job's cut-over scheduled", "job", id, "at", at, "user", user)
		return "cut-over at " + at.Format("2006-01-02 15:04:05")
	}
	p.log.Info("ddl: job's cut-over requested", "job", id, "user", user)
	return "successful"
}

// wakeUp tells a job waiting for its completion to look again.
func (r *jobRec) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// mayCutOver reports whether a postponed job has been told to cut over:
// now, or at a time that has come.
func (r *jobRec) mayCutOver(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job.CompleteRequested || (!r.job.CompleteAt.IsZero() && !now.Before(r.job.CompleteAt))
}

// awaitCompletion holds a postponed job before its cut-over until it is
// told to go, keeping the shadow up with the table meanwhile.
func (r *runner) awaitCompletion(ctx context.Context) error {
	if !r.set.PostponeCutOver || r.rec.mayCutOver(time.Now()) {
		return nil
	}
	if err := r.p.jobs.update(r.rec, func(j *Job) {
		if j.ReadySince.IsZero() {
			j.ReadySince = time.Now()
		}
	}); err != nil {
		return err
	}
	r.log.Info("ddl: ready to cut over; waiting for ADMIN COMPLETE DDL JOBS", "job_id", r.rec.snapshot().ID)
	verified := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.rec.wake:
		case <-time.After(readyCatchUpEvery):
		}
		if r.rec.mayCutOver(time.Now()) {
			r.log.Info("ddl: told to cut over", "ready_for", time.Since(r.rec.snapshot().ReadySince).Round(time.Millisecond))
			return nil
		}
		if err := r.catchUp(ctx); err != nil {
			return err
		}
		if time.Since(verified) >= readyVerifyEvery {
			if err := r.verify(ctx); err != nil {
				return err
			}
			verified = time.Now()
		}
	}
}

// cutOverState is the CUT_OVER column: how a running job's cut-over is
// to come ("" for one that cuts over as soon as it is ready).
func (j Job) cutOverState() string {
	if j.State == StateDone || j.State == StateFailed || j.State == StateCancelled {
		return ""
	}
	at := ""
	if !j.CompleteAt.IsZero() {
		at = ", at " + j.CompleteAt.Local().Format("2006-01-02 15:04:05")
	}
	switch {
	case j.CutOverAttempt > 1:
		return fmt.Sprintf("retrying (attempt %d)", j.CutOverAttempt)
	case !j.Checkpoint.Settings.PostponeCutOver:
		return ""
	case j.CompleteRequested:
		return "completing"
	case !j.ReadySince.IsZero():
		return "ready to cut over" + at
	}
	return "postponed" + at
}
