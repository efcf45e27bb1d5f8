package ddloffload

import (
	"context"
	"time"
)

// cleanup drops the old table, or records when it is due: it is kept for
// OldTableRetention so a bad index can be backed out by renaming it back.
// The swap is done by now, so a failure here does not fail the job: the
// janitor retries the drop.
func (r *runner) cleanup(ctx context.Context) error {
	_ = r.stall(ctx, StageCleanup)
	retention := time.Duration(*r.p.opts.OldTableRetention)
	if retention == 0 {
		_, err := r.conn.Execute("DROP TABLE IF EXISTS " + tableName(r.t.Schema, r.old))
		if err == nil {
			return nil
		}
		r.log.Warn("ddl: cannot drop the old table; the janitor will retry", "table", r.old, "err", err)
	}
	due := time.Now().Add(retention)
	if err := r.p.jobs.update(r.rec, func(j *Job) { j.DropOldAt = due }); err != nil {
		r.log.Warn("ddl: cannot record when to drop the old table", "table", r.old, "err", err)
	}
	return nil
}
