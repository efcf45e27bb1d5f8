package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
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
// engine (the log is written first at commit). While the application
// writes, a batch therefore first share-locks its keys in the table, in a
// statement of its own that also checksums each row it locked: once it has
// the locks, no writer whose change made a key dirty is still committing,
// and a locking read reads the newest committed version of each row. The
// copy that follows is a consistent read (READ COMMITTED), and a snapshot
// can still miss a transaction that has only just committed: MariaDB's
// InnoDB marks a transaction committed, which ends its implicit locks,
// before it removes it from the list that new snapshots exclude. So the
// copy checksums each row it wrote, inside its transaction, and a key
// whose row differs from what the locking read saw is marked dirty again
// (a writer that changed the row between the two reads makes them differ
// too; either way a later pass copies it again). That a lock alone did
// not suffice was seen once in CI: a row inserted under a running job was
// missing from the copy, and the verify stage refused the swap.
//
// The locks are released at once: a change made after they were taken
// marks its key dirty again, so holding them through the copy would only
// make the application's writers of those rows wait for it (seen: a
// second, on the hot rows of a skewed workload). And they are taken with
// NOWAIT: a statement that waited for a writer while holding the locks of
// its other keys could close a cycle with that writer's transaction, and
// InnoDB would fail the application's transaction (the smaller one) with
// a deadlock. A batch that meets a held key is copied in halves, down to
// the held key, which is tried again a moment later, then left for a
// later pass.

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

// copyKeys copies keys from the table into the shadow. A live copy
// returns the keys whose rows changed under it (see above): they must be
// copied again.
func (r *runner) copyKeys(c *client.Conn, keys [][]string, mode applyMode) (changed [][]string, err error) {
	cond := r.t.keyIn(keys)
	shadow := mysqlwire.QuoteTable(r.t.Schema, r.shadow)
	del := r.mark + "DELETE FROM " + shadow + " WHERE " + cond
	ins := r.mark + "INSERT INTO " + shadow + " (" + r.t.copyColumns() + ") SELECT " + r.t.copyColumns() + " FROM " + r.t.name() +
		" WHERE " + cond + " ORDER BY " + r.t.keyList()
	if mode != live {
		return nil, execAll(c, []string{"BEGIN", del, ins, "COMMIT"})
	}
	// Autocommit: the locks end with the statement that took them. The
	// first read takes no locks and brings the keys' pages into the
	// buffer pool, so that the locking read is quick: it holds the locks
	// of the keys it has read while it reads the next ones.
	if _, err := c.Execute("SELECT " + r.t.keyList() + " FROM " + r.t.name() + " WHERE " + cond); err != nil {
		return nil, err
	}
	locked, err := r.rowSums(c, r.t.name(), cond, r.shareLock(c))
	if err != nil {
		return nil, err
	}
	if r.afterLock != nil {
		r.afterLock(keys)
	}
	if err := execAll(c, []string{"BEGIN", del, ins}); err != nil {
		return nil, err
	}
	copied, err := r.rowSums(c, shadow, cond, "")
	if err == nil {
		_, err = c.Execute("COMMIT")
	}
	if err != nil {
		_, _ = c.Execute("ROLLBACK")
		return nil, err
	}
	changed = locked.differ(copied)
	r.raced.Add(int64(len(changed)))
	return changed, nil
}

// rowSums are rows' checksums by key.
type rowSums map[string]rowSum

type rowSum struct {
	key []string // literals
	sum uint64
}

// rowSums reads the checksum of each row of a table that matches cond
// (suffix ends the statement: a locking clause, or nothing).
func (r *runner) rowSums(c *client.Conn, table, cond, suffix string) (rowSums, error) {
	res, err := c.Execute("SELECT " + r.t.keyList() + ", " + r.t.checksumExpr() + " FROM " + table + " WHERE " + cond + suffix)
	if err != nil {
		return nil, err
	}
	n := len(r.t.Key)
	sums := make(rowSums, len(res.Values))
	for _, row := range res.Values {
		key, err := r.t.keyLiterals(row[:n])
		if err != nil {
			return nil, err
		}
		sums[keyID(key)] = rowSum{key: key, sum: row[n].AsUint64()}
	}
	return sums, nil
}

// differ lists the keys whose rows are not the same in a and b.
func (a rowSums) differ(b rowSums) [][]string {
	var out [][]string
	for k, x := range a {
		if y, ok := b[k]; !ok || y.sum != x.sum {
			out = append(out, x.key)
		}
	}
	for k, y := range b {
		if _, ok := a[k]; !ok {
			out = append(out, y.key)
		}
	}
	return out
}

// shareLock is the clause that share-locks the rows a live batch reads
// without waiting for a lock: LOCK IN SHARE MODE NOWAIT where the backend
// accepts it (MariaDB 10.3 and later), FOR SHARE NOWAIT (MySQL 8.0), and
// plain LOCK IN SHARE MODE on a backend that knows neither. It is found
// by asking the backend once per job.
func (r *runner) shareLock(c *client.Conn) string {
	r.shareOnce.Do(func() {
		r.shareClause = " LOCK IN SHARE MODE"
		for _, clause := range []string{" LOCK IN SHARE MODE NOWAIT", " FOR SHARE NOWAIT"} {
			if _, err := c.Execute("SELECT 1 FROM " + r.t.name() + " WHERE 1 = 0" + clause); err == nil {
				r.shareClause = clause
				break
			}
		}
		r.log.Debug("ddl: rows are share-locked with" + r.shareClause)
	})
	return r.shareClause
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
				done, err := th.acquireBatch(ctx)
				if err != nil {
					return n, err
				}
				release = done
			}
			sp, err := r.copySplit(c, batch, mode)
			release()
			if err != nil {
				return n, err
			}
			progress = progress || sp.copied
			if len(sp.dup) > 0 {
				failed, dupErr = append(failed, sp.dup...), sp.dupErr
			}
			if len(sp.held) > 0 {
				// An application transaction holds these rows: copy
				// them on a later pass.
				r.stream.requeue(sp.held)
			}
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

// split is what copySplit did with a batch of keys.
type split struct {
	copied bool       // some keys were copied
	held   [][]string // keys an application transaction holds or changes (live only)
	dup    [][]string // keys whose copy met a duplicate in the shadow
	dupErr error      // the backend's error for one of them
}

// copySplit copies keys, and when the batch fails for some of them (a
// duplicate, or in live mode a key a writer holds), copies its halves
// apart, down to the keys that fail alone: the others are not held back
// by them.
func (r *runner) copySplit(c *client.Conn, keys [][]string, mode applyMode) (split, error) {
	changed, err := r.copyKeys(c, keys, mode)
	if len(keys) == 1 {
		// A writer's transaction is a few statements: a key it holds
		// is likely free a moment later.
		for pause := 5 * time.Millisecond; isLockTimeout(err) && pause <= 10*time.Millisecond; pause *= 2 {
			time.Sleep(pause)
			changed, err = r.copyKeys(c, keys, mode)
		}
	}
	switch {
	case err == nil:
		return split{copied: true, held: changed}, nil
	case isLockTimeout(err) && mode == live:
		if len(keys) == 1 {
			return split{held: keys}, nil
		}
	case isDupEntry(err):
		if len(keys) == 1 {
			return split{dup: keys, dupErr: err}, nil
		}
	default:
		return split{}, err
	}
	var sp split
	h := len(keys) / 2
	for _, part := range [][][]string{keys[:h], keys[h:]} {
		p, err := r.copySplit(c, part, mode)
		if err != nil {
			return sp, err
		}
		sp.copied = sp.copied || p.copied
		sp.held = append(sp.held, p.held...)
		sp.dup = append(sp.dup, p.dup...)
		if p.dupErr != nil {
			sp.dupErr = p.dupErr
		}
	}
	return sp, nil
}

// catchUp applies dirty keys until few are left: a pass that finds fewer
// than a batch of them, or that takes under half a second. Its batches are
// throttled as the copy is, and paced down to catchUpMinShare while the
// passes shrink: a pass that found more keys than the one before runs the
// next one unpaced, so that pacing never keeps the catch-up from ending.
func (r *runner) catchUp(ctx context.Context) error {
	return r.throttled(ctx, func(th *throttle) error { return r.catchUpPaced(ctx, th) })
}

func (r *runner) catchUpPaced(ctx context.Context, th *throttle) error {
	last := -1 // keys of the last pass
	for pass := 0; pass < 100; pass++ {
		if err := r.rec.gate.wait(ctx); err != nil {
			return err
		}
		if err := r.readToEnd(ctx, time.Minute); err != nil {
			return err
		}
		th.setBatchPace(catchUpPace(last, r.stream.pending()))
		t0 := time.Now()
		n, err := r.drain(ctx, r.conn, live, th)
		if err != nil {
			return err
		}
		last = n
		if pass == 0 {
			if err := r.stall(ctx, StageCatchUp); err != nil {
				return err
			}
		}
		if n < applyBatch || time.Since(t0) < 500*time.Millisecond {
			r.log.Debug("ddl: caught up", "pass", pass, "keys", n, "pending", r.stream.pending(), "keys_raced", r.raced.Load())
			return nil
		}
	}
	return fmt.Errorf("catch-up: the table changes faster than the job can apply (%d keys pending)", r.stream.pending())
}

// catchUpPace is the least share a catch-up pass of pending keys is paced
// at (see throttle.acquireBatch), after a pass of last keys (-1: it is the
// first): catchUpMinShare while the passes shrink, else none.
func catchUpPace(last, pending int) float64 {
	if last >= 0 && pending >= last {
		return 0
	}
	return catchUpMinShare
}
