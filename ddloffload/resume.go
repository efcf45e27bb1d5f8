package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// recover settles the jobs that were running when the proxy stopped
// (killed, or shut down mid-job). For each, first the statements its dead
// run left on the backend are ended; then:
//
//   - if its RENAME had happened (the shadow's name is gone and the old
//     table is there, which preflight ruled out before the job), it
//     succeeded: it is marked done, its old table kept for the retention;
//   - if it was being cancelled, it is rolled back: its shadow is dropped;
//   - otherwise it is resumed from its checkpoint, in the background (its
//     client went with the proxy), paused if it was paused. A resumed job
//     that cannot go on (its binary log purged, the table changed) fails
//     and drops its shadow like any other failed job: the original table
//     was never touched.
func (p *Plugin) recover() {
	for _, rec := range p.jobs.records() {
		j := rec.snapshot()
		if j.State != StateRunning && j.State != StatePaused {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.settle(rec, j)
		}()
	}
}

func (p *Plugin) settle(rec *jobRec, j Job) {
	log := p.log.With("job", j.ID, "table", j.Schema+"."+j.Table, "stage", j.Stage)
	// A job left running is never forgotten: wait for the backend.
	var c *client.Conn
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		var err error
		c, err = p.backend.Connect(ctx, j.User, "")
		cancel()
		if err == nil {
			break
		}
		log.Warn("ddl: cannot reach the backend to settle a job interrupted by a proxy stop; retrying", "err", err)
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
	defer c.Close()
	if err := killOrphans(p.ctx, c, j.ID); err != nil {
		log.Error("ddl: cannot end an interrupted job's statements; it stays as it is until the next start", "err", err)
		return
	}
	swapped, err := jobSwapped(c, j)
	if err != nil {
		log.Error("ddl: cannot settle a job interrupted by a proxy stop", "err", err)
		return
	}
	var req *Request
	why := ""
	switch {
	case swapped:
	case j.CancelRequested:
		why = "cancelled"
	default:
		var ok bool
		pd := plugins.Parse(j.Query)
		req, ok = parseRequest(pd.Stmts, pd.Err, j.DB)
		pd.Release()
		if !ok || req.Schema != j.Schema || req.Table != j.Table {
			req, why = nil, "its statement cannot be read again"
		}
	}
	if req != nil {
		if err := p.jobs.update(rec, func(j *Job) { j.Resumes++; j.Paused = false }); err != nil {
			log.Error("ddl: cannot record the resume of a job", "err", err)
			return
		}
		rec.rowsDone.Store(j.Checkpoint.Rows)
		if j.Paused {
			rec.gate.pause()
			_ = p.jobs.update(rec, func(j *Job) { j.Paused = true })
		}
		log.Info("ddl: resuming a job interrupted by a proxy stop", "checkpoint_rows", j.Checkpoint.Rows, "copy_done", j.Checkpoint.CopyDone)
		_ = p.execute(rec, req, true)
		return
	}
	if !swapped && j.Shadow != "" {
		if _, err := c.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(j.Schema, j.Shadow)); err != nil {
			log.Error("ddl: cannot drop an interrupted job's shadow table", "err", err)
			return
		}
	}
	if dir := j.Checkpoint.Settings.TempDir; dir != "" {
		os.RemoveAll(jobTempDir(dir, j.ID))
	}
	os.Remove(p.rangeLogPath(j.ID))
	err = p.jobs.update(rec, func(j *Job) {
		j.End = time.Now()
		j.Checkpoint = Checkpoint{Settings: j.Checkpoint.Settings}
		switch {
		case swapped:
			j.State, j.Stage = StateDone, StageDone.String()
			j.DropOldAt = time.Now().Add(time.Duration(*p.opts.OldTableRetention))
		case j.CancelRequested:
			j.State, j.ErrorCode = StateCancelled, mysql.ER_QUERY_INTERRUPTED
			j.Error = fmt.Sprintf("Query execution was interrupted (tableproxy DDL job %d cancelled)", j.ID)
		default:
			j.State, j.ErrorCode = StateFailed, mysql.ER_UNKNOWN_ERROR
			j.Error = "interrupted by a proxy restart during stage " + j.Stage + ", and not resumed: " + why
		}
	})
	if err != nil {
		log.Error("ddl: cannot record how an interrupted job ended", "err", err)
		return
	}
	log.Warn("ddl: job interrupted by a proxy stop settled", "swapped", swapped, "rolled_back", !swapped, "why", why)
	if swapped {
		p.wakeJanitor()
	}
}

// jobSwapped reports whether a stopped job's RENAME happened.
func jobSwapped(c *client.Conn, j Job) (bool, error) {
	if j.Shadow == "" {
		return false, nil
	}
	exists := func(name string) (bool, error) {
		r, err := c.Execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", j.Schema, name)
		if err != nil {
			return false, err
		}
		n, _ := r.GetInt(0, 0)
		return n > 0, nil
	}
	hasShadow, err1 := exists(j.Shadow)
	hasOld, err2 := exists(j.Old)
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	return !hasShadow && hasOld && (j.Stage == StageCutOver.String() || j.Stage == StageCleanup.String()), nil
}

// prepareResume readies a resumed job's run. Before its stream's start was
// recorded, nothing it made is of use: its shadow, if any, is dropped and
// the job starts over.
func (r *runner) prepareResume(ctx context.Context) error {
	if r.cp.started() {
		return nil
	}
	j := r.rec.snapshot()
	r.cp = Checkpoint{Settings: r.cp.Settings}
	if j.Shadow == "" {
		return nil
	}
	c, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Execute(r.mark + "DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(j.Schema, j.Shadow))
	return err
}
