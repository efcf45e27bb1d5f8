package ddloffload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/mysqlwire"
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
	if err := r.readToEnd(ctx, streamWait); err != nil {
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
// checksums over every stored column, while the application writes on.
// Each range is read afresh from both tables (READ COMMITTED: no snapshot
// kept, no lock taken). Ranges the application is not changing match at
// once. A range that differs may hold changes the shadow has not received
// yet: the shadow catches up and the range is read again. One that still
// differs (rows written all the time) is compared at a still moment: the
// table read-locked for a moment, the shadow brought up to the binary
// log's end, and then the two must match exactly; a difference is a
// defect, and fails the job before anything is swapped.
//
// An earlier verify compared both tables whole in consistent snapshots
// opened under one table lock. On a table with hot rows that was ruinous:
// the snapshots grew older while the rows changed every few milliseconds,
// every read of a hot row walked back through its versions, and the
// verify of a 2M-row table under a foreground took minutes.
func (r *runner) verify(ctx context.Context) error {
	if err := r.catchUp(ctx); err != nil {
		return err
	}
	if err := r.stall(ctx, StageVerify); err != nil {
		return err
	}
	var all []keyRange
	if err := r.walk(ctx, r.conn, keyRange{}, func(_ int, kr keyRange) error { all = append(all, kr); return nil }); err != nil {
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
	}
	work := make(chan keyRange, len(all))
	for _, kr := range all {
		work <- kr
	}
	close(work)
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		firstErr       error
		readAgain      atomic.Int64 // ranges read more than once
		comparedFrozen atomic.Int64 // ranges compared with the table read-locked
	)
	// The checksums are throttled as the copy is: they read both tables
	// whole.
	_ = r.throttled(ctx, func(th *throttle) error {
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for kr := range work {
					err := r.verifyRange(ctx, c, th, kr, &readAgain, &comparedFrozen)
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
	if firstErr == nil {
		r.log.Info("ddl: shadow verified", "ranges", len(all), "read_again", readAgain.Load(), "compared_frozen", comparedFrozen.Load(),
			"keys_raced", r.raced.Load())
	}
	return firstErr
}

// verifyRetries is how often a range that differs is read again, the
// shadow caught up in between, before it is compared with the table
// read-locked (compareFrozen).
const verifyRetries = 2

// verifyRange compares one range (see verify).
func (r *runner) verifyRange(ctx context.Context, c *client.Conn, th *throttle, kr keyRange, readAgain, comparedFrozen *atomic.Int64) error {
	for attempt := 0; ; attempt++ {
		done, err := th.acquire(ctx)
		if err != nil {
			return err
		}
		a, b, err := r.rangeSums(c, kr)
		done()
		if err != nil {
			return err
		}
		if a == b {
			return nil
		}
		if attempt == verifyRetries {
			break
		}
		if attempt == 0 {
			readAgain.Add(1)
		}
		if err := r.applyDirty(ctx, th); err != nil {
			return err
		}
	}
	comparedFrozen.Add(1)
	return r.compareFrozen(ctx, c, kr)
}

// rangeSums checksums one key range of the table and of the shadow.
func (r *runner) rangeSums(c *client.Conn, kr keyRange) (table, shadow string, err error) {
	if table, err = r.rangeSum(c, r.t.name(), kr); err != nil {
		return "", "", err
	}
	shadow, err = r.rangeSum(c, mysqlwire.QuoteTable(r.t.Schema, r.shadow), kr)
	return table, shadow, err
}

// rangeSum checksums one key range of a table: its row count and the XOR
// of its rows' checksums.
func (r *runner) rangeSum(c *client.Conn, table string, kr keyRange) (string, error) {
	return r.sumWhere(c, table, r.t.rangeCond(kr))
}

// sumWhere checksums the rows of a table that match cond, as rangeSum
// does.
func (r *runner) sumWhere(c *client.Conn, table, cond string) (string, error) {
	res, err := c.Execute("SELECT COUNT(*), IFNULL(BIT_XOR(" + r.t.checksumExpr() + "), 0) FROM " + table + " WHERE " + cond)
	if err != nil {
		return "", err
	}
	n, _ := res.GetInt(0, 0)
	x, _ := res.GetUint(0, 1)
	return strconv.FormatInt(n, 10) + "/" + strconv.FormatUint(x, 16), nil
}

// applyDirty brings the shadow up to the binary log's end now: the
// stream reads that far, and every dirty key no writer holds is copied.
// The verify's workers share the job's control connection for it.
func (r *runner) applyDirty(ctx context.Context, th *throttle) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if err := r.readToEnd(ctx, streamWait); err != nil {
		return err
	}
	_, err := r.drain(ctx, r.conn, live, th)
	return err
}

// compareFrozen compares a range whose rows keep changing at a still
// moment: the table read-locked (see syncFrozen: writers wait, readers go
// on), the shadow brought up to the binary log's end, both ranges read.
// They must be equal. Writers wait for one catch-up and one checksum of a
// range: the shadow's is read after the unlock, as nothing but this
// catch-up writes it (the control connection is held until the end).
// Tens of milliseconds, for the few ranges with hot rows. (Share
// locks on the range's rows alone would spare the other writers, but a
// hot row is almost never free of them, and waiting for one while holding
// others could deadlock with a writer.)
func (r *runner) compareFrozen(ctx context.Context, c *client.Conn, kr keyRange) error {
	// The control connection is taken before the table is locked: a
	// worker's catch-up holding it may be waiting for the throttle, which
	// may be waiting for the writers the lock holds up.
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	var a, b string
	err := r.syncFrozen(ctx, lockAttempts, r.lockWait(), streamWait, func(unlock func()) error {
		var err error
		if a, err = r.rangeSum(c, r.t.name(), kr); err != nil {
			return err
		}
		unlock()
		b, err = r.rangeSum(c, mysqlwire.QuoteTable(r.t.Schema, r.shadow), kr)
		return err
	})
	if err != nil {
		return err
	}
	if a != b {
		r.log.Warn("ddl: verify: rows that differ (read after the unlock: the table may have changed since)",
			"where", r.t.rangeCond(kr), "rows", r.rangeDiff(c, kr, 20))
		return errJob("verify: %s and its copy differ where %s (count/xor %s against %s); nothing was changed",
			r.t.name(), r.t.rangeCond(kr), a, b)
	}
	return nil
}

// rangeDiff lists, for the log, up to max keys of a range whose rows differ
// between the table and the shadow, each with its checksum on either side
// ("-" where the row is missing).
func (r *runner) rangeDiff(c *client.Conn, kr keyRange, max int) []string {
	table, err := r.rowSums(c, r.t.name(), r.t.rangeCond(kr), "")
	if err != nil {
		return []string{err.Error()}
	}
	shadow, err := r.rowSums(c, mysqlwire.QuoteTable(r.t.Schema, r.shadow), r.t.rangeCond(kr), "")
	if err != nil {
		return []string{err.Error()}
	}
	side := func(sums rowSums, id string) string {
		if s, ok := sums[id]; ok {
			return strconv.FormatUint(s.sum, 10)
		}
		return "-"
	}
	var out []string
	for _, k := range table.differ(shadow) {
		id := keyID(k)
		out = append(out, fmt.Sprintf("(%s) table %s shadow %s", strings.Join(k, ", "), side(table, id), side(shadow, id)))
	}
	slices.Sort(out)
	return out[:min(len(out), max)]
}

// String describes a range for logs.
func (kr keyRange) String() string { return fmt.Sprintf("(%v, %v]", kr.lo, kr.hi) }
