package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// The applier brings the shadow up to date with the table by copying dirty
// keys again: for a batch of keys, delete them from the shadow and insert
// what the table holds for them now. That is idempotent and absolute: the
// result for a key depends only on the table's row at the time of the
// copy, not on how often the key changed or in which order its events
// arrived, so events are deduplicated by key, and a key copied again is
// harmless. A change made after the copy marks the key dirty once more.
//
// A change can reach the binary log a moment before it is visible in the
// engine (the log is written first at commit). The batch therefore first
// reads its keys in the table with LOCK IN SHARE MODE, which waits for any
// writer still holding them, before the copy reads them.

const applyBatch = 500

// applyMode says what guards a copy of dirty keys.
type applyMode int

const (
	// live: writers run; each batch waits for writers holding its keys.
	live applyMode = iota
	// frozen: another connection holds the table read-locked, so every
	// writer has finished; a plain transaction suffices.
	frozen
)

// copyKeys copies keys from the table into the shadow.
func (r *runner) copyKeys(c *client.Conn, keys [][]string, mode applyMode) error {
	cond := r.t.keyIn(keys)
	shadow := tableName(r.t.Schema, r.shadow)
	stmts := []string{
		r.mark + "DELETE FROM " + shadow + " WHERE " + cond,
		r.mark + "INSERT INTO " + shadow + " (" + r.t.copyColumns() + ") SELECT " + r.t.copyColumns() + " FROM " + r.t.name() +
			" WHERE " + cond + " ORDER BY " + r.t.keyList(),
		"COMMIT",
	}
	if mode == live {
		stmts = append([]string{"BEGIN", "SELECT " + r.t.keyList() + " FROM " + r.t.name() + " WHERE " + cond + " LOCK IN SHARE MODE"}, stmts...)
	} else {
		stmts = append([]string{"BEGIN"}, stmts...)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = execAll(c, stmts); err == nil || !isLockTimeout(err) {
			return err
		}
	}
	return err
}

func execAll(c *client.Conn, stmts []string) error {
	for _, s := range stmts {
		if _, err := c.Execute(s); err != nil {
			_, _ = c.Execute("ROLLBACK")
			return err
		}
	}
	return nil
}

func isDupEntry(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && me.Code == mysql.ER_DUP_ENTRY
}

// drain copies every key dirty now. Once the shadow has unique indexes, a
// copy can meet a row of the shadow that is itself dirty and not yet
// copied (its value moved to the row being copied): such keys are retried
// after the others. With exact (the table is frozen, so every dirty key
// is known), a duplicate that survives a pass that copied everything else
// is real, and fails the job with the backend's 1062; otherwise the keys
// go back to the dirty set for a later pass. Exact is every mode but live.
//
// th, when not nil, paces the batches (the live catch-up copies under the
// application's feet, and its share locks make writers of those rows wait).
func (r *runner) drain(ctx context.Context, c *client.Conn, mode applyMode, th *throttle) (int, error) {
	exact := mode != live
	keys, err := r.stream.take()
	if err != nil {
		return 0, err
	}
	n := len(keys)
	for len(keys) > 0 {
		var failed [][]string
		var dupErr error
		progress := false
		for i := 0; i < len(keys); i += applyBatch {
			batch := keys[i:min(i+applyBatch, len(keys))]
			release := func() {}
			if th != nil {
				done, err := th.acquire(ctx)
				if err != nil {
					return n, err
				}
				release = done
			}
			err := r.copyKeys(c, batch, mode)
			release()
			if isDupEntry(err) && len(batch) > 1 {
				for _, k := range batch {
					if err := r.copyKeys(c, [][]string{k}, mode); isDupEntry(err) {
						failed, dupErr = append(failed, k), err
					} else if err != nil {
						return n, err
					} else {
						progress = true
					}
				}
				continue
			}
			if isDupEntry(err) {
				failed, dupErr = append(failed, batch...), err
				continue
			}
			if isLockTimeout(err) && mode == live {
				// An application transaction holds some of these rows:
				// copy them on a later pass.
				r.stream.requeue(batch)
				continue
			}
			if err != nil {
				return n, err
			}
			progress = true
		}
		if len(failed) == 0 {
			return n, nil
		}
		if !exact {
			r.stream.requeue(failed)
			return n, nil
		}
		if !progress {
			return n, dupErr
		}
		keys = failed
	}
	return n, nil
}

// catchUp applies dirty keys until few are left: a pass that finds fewer
// than a batch of them, or that takes under half a second. Its batches are
// throttled as the copy is.
func (r *runner) catchUp(ctx context.Context) error {
	return r.throttled(ctx, func(th *throttle) error { return r.catchUpPaced(ctx, th) })
}

func (r *runner) catchUpPaced(ctx context.Context, th *throttle) error {
	for pass := 0; pass < 100; pass++ {
		if err := r.rec.gate.wait(ctx); err != nil {
			return err
		}
		target, err := r.binlogEnd()
		if err != nil {
			return err
		}
		if err := r.stream.waitFor(ctx, target, time.Minute); err != nil {
			return err
		}
		t0 := time.Now()
		n, err := r.drain(ctx, r.conn, live, th)
		if err != nil {
			return err
		}
		if pass == 0 {
			if err := r.stall(ctx, StageCatchUp); err != nil {
				return err
			}
		}
		if n < applyBatch || time.Since(t0) < 500*time.Millisecond {
			r.log.Debug("ddl: caught up", "pass", pass, "keys", n, "pending", r.stream.pending())
			return nil
		}
	}
	return fmt.Errorf("catch-up: the table changes faster than the job can apply (%d keys pending)", r.stream.pending())
}
