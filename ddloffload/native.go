package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The guarded native strategy (SET tableproxy_ddl_strategy = native) runs
// the backend's own online index build, ALTER TABLE ... ALGORITHM=INPLACE,
// LOCK=NONE, as a job (listed, cancellable, resumed after a proxy stop),
// guarded against the metadata-lock pile-up native DDL is known for: the
// ALTER needs an exclusive metadata lock for a moment at its start and its
// end, and while it waits for one (behind a long transaction on the
// table), every new statement on the table queues behind it. Here it waits
// at most tableproxy_ddl_lock_wait_timeout seconds, gives up, lets the
// queue drain, and tries again (tableproxy_ddl_native_retries times, with
// growing, jittered pauses), so the application waits that long at most.
// The backend refuses it with its own error where it cannot run online.

// nativePreflight checks what the backend would, with the same errors, and
// finds a resumed job's ALTER already done.
func (r *runner) nativePreflight(ctx context.Context) error {
	var err error
	if r.conn, err = r.connect(ctx); err != nil {
		return err
	}
	r.connID.Store(r.conn.GetConnectionID())
	if r.t, err = loadTable(r.conn, r.req.Schema, r.req.Table); err != nil {
		return err
	}
	if len(r.cp.IndexNames) == len(r.req.Indexes) {
		for i := range r.req.Indexes {
			r.req.Indexes[i].Name = r.cp.IndexNames[i]
		}
	}
	if r.resumed && r.allIndexesExist() {
		r.nativeDone = true
		return nil
	}
	if err := r.checkIndexes(); err != nil {
		return err
	}
	if err := r.saveCheckpoint(); err != nil {
		return err
	}
	return r.p.jobs.update(r.rec, func(j *Job) { j.RowsEstimate = r.t.RowsEstimate })
}

// allIndexesExist reports whether every named index of the request is on
// the table: a resumed job's earlier run finished its ALTER.
func (r *runner) allIndexesExist() bool {
	for _, ix := range r.req.Indexes {
		if ix.Name == "" || !r.t.hasIndex(ix.Name) {
			return false
		}
	}
	return true
}

func (r *runner) nativeAlter(ctx context.Context) error {
	if r.nativeDone {
		return nil
	}
	clauses := make([]string, len(r.req.Indexes))
	for i, ix := range r.req.Indexes {
		clauses[i] = ix.clause()
	}
	stmt := r.mark + "ALTER TABLE " + r.t.name() + " " + strings.Join(clauses, ", ") + ", ALGORITHM=INPLACE, LOCK=NONE"
	if _, err := r.conn.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", r.set.LockWaitTimeout)); err != nil {
		return err
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go r.pollNativeProgress(pollCtx, r.conn.GetConnectionID())
	var errs []error
	for attempt := 1; ; attempt++ {
		_, err := r.conn.Execute(stmt)
		if err == nil {
			r.rec.rowsDone.Store(r.t.RowsEstimate)
			return nil
		}
		if !isLockTimeout(err) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if attempt >= r.set.NativeRetries {
			// The client gets the backend's own 1205, the attempts logged.
			r.log.Warn("ddl: native ALTER gave up", "attempts", attempt, "err", errors.Join(errs...))
			return err
		}
		pause := min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)
		pause += rand.N(pause / 2)
		r.log.Info("ddl: native ALTER could not get its metadata lock; retrying", "attempt", attempt, "after", pause)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// pollNativeProgress reads the ALTER's progress from the process list
// (MariaDB's PROGRESS column) into the job's rows.
func (r *runner) pollNativeProgress(ctx context.Context, id uint32) {
	c, err := r.connect(ctx)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		res, err := c.Execute("SELECT IFNULL(PROGRESS, 0) FROM information_schema.PROCESSLIST WHERE ID = ?", id)
		if err != nil || res.RowNumber() == 0 {
			continue // MySQL has no PROGRESS column: no progress then
		}
		pct, _ := res.GetFloat(0, 0)
		r.rec.rowsDone.Store(int64(float64(r.t.RowsEstimate) * pct / 100))
	}
}
