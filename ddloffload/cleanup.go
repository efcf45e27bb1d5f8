package ddloffload

import (
	"context"
	"time"

	"tableproxy/internal/mysqlwire"
)

// cleanup drops the old table, or records when it is due: it is kept for
// OldTableRetention so a bad index can be backed out by renaming it back.
// The swap is done by now, so a failure here does not fail the job: the
// janitor retries the drop.
func (r *runner) cleanup(ctx context.Context) error {
	_ = r.stall(ctx, StageCleanup)
	retention := time.Duration(*r.p.opts.OldTableRetention)
	if retention == 0 {
		_, err := r.conn.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(r.t.Schema, r.old))
		if err == nil {
			return nil
		}
		r.log.Warn("ddl: cannot drop the old table; the janitor will retry", "table", r.old, "err", err)
	}
	due := time.Now().Add(retention)
	if err := r.p.jobs.update(r.rec, func(j *Job) { j.DropOldAt = due }); err != nil {
		r.log.Warn("ddl: cannot record when to drop the old table", "table", r.old, "err", err)
	}
	r.p.wakeJanitor()
	return nil
}

// janitor drops kept originals when their retention ends: at start (a
// proxy that was down when one was due drops it as soon as it is back,
// from the jobs file), when one is due, and every janitorEvery to retry
// a drop that failed. Only the proxy that ran a job knows it, so exactly
// one proxy drops each kept table, in a cluster as alone.
func (p *Plugin) janitor() {
	defer p.wg.Done()
	for {
		next := p.dropDueOldTables(time.Now())
		wait := janitorEvery
		if !next.IsZero() {
			wait = min(wait, max(0, time.Until(next)))
		}
		t := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-p.janitorWake:
		case <-t.C:
		}
		t.Stop()
	}
}

// janitorEvery is how often the janitor looks at the jobs when none is
// due sooner.
const janitorEvery = 30 * time.Second

// wakeJanitor makes the janitor look at the jobs again (a kept table's
// drop time was just set).
func (p *Plugin) wakeJanitor() {
	select {
	case p.janitorWake <- struct{}{}:
	default:
	}
}

// dropDueOldTables drops the kept tables due by now, and returns when the
// next one is due (zero if none is kept). A job still running keeps its
// original until it ends.
func (p *Plugin) dropDueOldTables(now time.Time) (next time.Time) {
	for _, rec := range p.jobs.records() {
		j := rec.snapshot()
		if j.KeptTable() == "" || j.State == StateRunning {
			continue
		}
		if j.DropOldAt.After(now) {
			if next.IsZero() || j.DropOldAt.Before(next) {
				next = j.DropOldAt
			}
			continue
		}
		if err := p.dropKept(rec); err != nil {
			p.log.Warn("ddl: cannot drop a kept original table; retrying later", "job", j.ID, "table", j.Old, "err", err)
		}
	}
	return next
}

// dropKept drops a job's kept original and records that it is gone.
func (p *Plugin) dropKept(rec *jobRec) error {
	j := rec.snapshot()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	c, err := p.backend.Connect(ctx, j.User, "")
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(j.Schema, j.Old)); err != nil {
		return err
	}
	p.log.Info("ddl: dropped a job's kept original table", "job", j.ID, "table", j.Schema+"."+j.Old)
	return p.jobs.update(rec, func(j *Job) { j.DropOldAt = time.Time{} })
}
