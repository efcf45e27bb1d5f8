package ddloffload

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// syncFrozen read-locks the table on a connection of its own (writers
// finish, new ones wait, readers go on), brings the shadow up to the
// binary log's end, runs during, and unlocks. While during runs, the
// shadow holds exactly what the table holds; during may unlock early.
// The lock is tried attempts times, each bounded by wait; the stream has
// streamWait to reach the log's end.
func (r *runner) syncFrozen(ctx context.Context, attempts int, wait, streamWait time.Duration, during func(unlock func()) error) error {
	l, err := r.connect(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errConnect, err)
	}
	defer l.Close()
	if err := r.lockTables(ctx, l, r.t.name()+" READ", attempts, wait); err != nil {
		return err
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_, _ = l.Execute("UNLOCK TABLES")
		}
	}
	defer unlock()
	target, err := r.binlogEnd()
	if err != nil {
		return err
	}
	if err := r.stream.waitFor(ctx, target, streamWait); err != nil {
		return err
	}
	if _, err := r.drain(ctx, r.conn, frozen, nil); err != nil {
		return err
	}
	if during != nil {
		return during(unlock)
	}
	return nil
}

// verify compares the table and the shadow, range by range, with
// checksums over every stored column. Both are read in consistent
// snapshots opened while the table was frozen and the shadow equal to it,
// so they must match exactly whatever writers do meanwhile; a difference
// is a defect, and fails the job before anything is swapped.
func (r *runner) verify(ctx context.Context) error {
	if err := r.catchUp(ctx); err != nil {
		return err
	}
	conns := make([]*client.Conn, r.set.Workers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := r.connect(ctx)
		if err != nil {
			return err
		}
		conns[i] = c
		if _, err := c.Execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return err
		}
	}
	err := r.syncFrozen(ctx, lockAttempts, r.lockWait(), streamWait, func(func()) error {
		for _, c := range conns {
			if _, err := c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := r.stall(ctx, StageVerify); err != nil {
		return err
	}
	var all []keyRange
	if err := r.walk(ctx, conns[0], nil, func(_ int, kr keyRange) error { all = append(all, kr); return nil }); err != nil {
		return err
	}
	work := make(chan keyRange, len(all))
	for _, kr := range all {
		work <- kr
	}
	close(work)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	// The checksums are throttled as the copy is: they read both tables
	// whole.
	_ = r.throttled(ctx, func(th *throttle) error {
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for kr := range work {
					done, err := th.acquire(ctx)
					if err == nil {
						err = r.compareRange(c, kr)
						done()
					}
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		return nil
	})
	for _, c := range conns {
		_, _ = c.Execute("COMMIT")
	}
	if firstErr == nil {
		r.log.Info("ddl: shadow verified", "ranges", len(all))
	}
	return firstErr
}

// compareRange checksums one key range of the table and of the shadow.
func (r *runner) compareRange(c *client.Conn, kr keyRange) error {
	expr := r.t.checksumExpr()
	cond := r.t.rangeCond(kr)
	var sums [2]string
	for i, table := range []string{r.t.name(), tableName(r.t.Schema, r.shadow)} {
		res, err := c.Execute("SELECT COUNT(*), IFNULL(BIT_XOR(" + expr + "), 0) FROM " + table + " WHERE " + cond)
		if err != nil {
			return err
		}
		n, _ := res.GetInt(0, 0)
		x, _ := res.GetUint(0, 1)
		sums[i] = strconv.FormatInt(n, 10) + "/" + strconv.FormatUint(x, 16)
	}
	if sums[0] != sums[1] {
		return errJob("verify: %s and its copy differ where %s (count/xor %s against %s); nothing was changed",
			r.t.name(), cond, sums[0], sums[1])
	}
	return nil
}

// String describes a range for logs.
func (kr keyRange) String() string { return fmt.Sprintf("(%v, %v]", kr.lo, kr.hi) }
