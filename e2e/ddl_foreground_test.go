package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDDLLatencyThrottle: the copy waits while the foreground's statements
// through the proxy are slower than before the job by more than
// tableproxy_ddl_max_latency_pct (150% by default), and goes on once they
// are fast again. The foreground here is SELECT SLEEP(...), whose latency
// the test sets. The copy of 100,000 rows takes half a second here, less
// than the throttle needs to see a slower foreground, so the job pauses
// early in the copy (the fault tests' stall) while the foreground slows.
func TestDDLLatencyThrottle(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 100000)
	p := e.launchDDL(t, ", chunk_rows: 200", "backfill:3s")
	app := e.openVia(t, p, e.app)
	admin := e.openVia(t, p, e.admin)
	var sleepMicros atomic.Int64
	sleepMicros.Store(2000)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, _ = app.ExecContext(ctx, fmt.Sprintf("SELECT SLEEP(%f)", float64(sleepMicros.Load())/1e6))
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // what the foreground's latency was before the job
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitLog(t, p, 30*time.Second, `stalled for a fault test" job=1 table=`+e.db+".t stage=backfill")
	stallEnds := time.Now().Add(3 * time.Second)
	sleepMicros.Store(40000)
	j := waitJob(t, admin, 5*time.Second, "the job to be throttled", func(j ddlJob) bool { return j.State == "throttled" })
	if j.RowsDone >= 100000 {
		t.Fatalf("the copy ended before the throttle could hold it: %+v", j)
	}
	// Once the stall is over and the copy held (the throttle halves the
	// copy's share at most every half second, so the hold may come after
	// the stall), the chunks under way finish; then nothing moves.
	time.Sleep(time.Until(stallEnds))
	waitJob(t, admin, 5*time.Second, "the job to be throttled after the stall", func(j ddlJob) bool { return j.State == "throttled" })
	j, _ = lastJob(admin)
	for settle := time.Now().Add(3 * time.Second); ; {
		time.Sleep(300 * time.Millisecond)
		next, _ := lastJob(admin)
		if next.RowsDone == j.RowsDone {
			break
		}
		if time.Now().After(settle) {
			t.Fatalf("the copy went on while held: %+v then %+v", j, next)
		}
		j = next
	}
	time.Sleep(700 * time.Millisecond)
	j2, _ := lastJob(admin)
	if j2.State != "throttled" || j2.RowsDone != j.RowsDone {
		t.Errorf("the copy moved while the foreground was slow: %+v then %+v", j, j2)
	}
	sleepMicros.Store(2000)
	if err := <-done; err != nil {
		t.Fatalf("ALTER: %v", err)
	}
	log := p.stderr.String()
	for _, want := range []string{"the foreground's p99 latency before the job", "copy throttled", "the foreground's latency held the copy"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q", want)
		}
	}
	if ddl := showCreate(t, e.direct(t), "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLCutOverSparesTransactions: transactions through the proxy that
// read a row of the table and then write it, running all through three
// jobs, never fail. A transaction that had read the table when the
// cut-over's RENAME queued for it would deadlock with that RENAME on its
// write, and MariaDB would fail it with 1213; the cut-over holds
// transactions begun during it at their first statement on the table, and
// waits for those open before it to end. Half the transactions pause after
// BEGIN: until their first read InnoDB has no transaction for them
// (INNODB_TRX does not list them), so only the proxy knows they are open.
func TestDDLCutOverSparesTransactions(t *testing.T) {
	e := newDDLEnv(t)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, fmt.Sprintf("GRANT PROCESS ON *.* TO '%s'@'%s'", e.app.name, host))
	}
	e.restartWith(t, e.ddlOptions(", max_latency_pct: 0"))
	e.seed(t, 20000)
	app := e.open(t, e.app)
	pause := func() time.Duration { return time.Duration(rand.IntN(30)) * time.Millisecond }
	stop := runTransactions(8, func() error {
		return readThenWrite(app, 1+rand.IntN(20000), pause(), pause())
	})
	// No DROP INDEX between the jobs: MariaDB's own would deadlock with
	// these transactions the same way.
	for _, col := range []string{"c", "k", "pad"} {
		if err := <-goExec(app, "ALTER TABLE t ADD INDEX idx_"+col+" ("+col+")"); err != nil {
			stop()
			t.Fatalf("ADD INDEX idx_%s: %v", col, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	txs, failed := stop()
	if len(failed) > 0 {
		t.Errorf("%d of %d transactions failed, first: %s", len(failed), txs, failed[0])
	}
	if n := strings.Count(e.proxy.stderr.String(), "ddl: swapped"); n != 3 {
		t.Errorf("%d swaps in the log, want 3", n)
	}
}

// runTransactions runs tx on n goroutines, over and over, until stop is
// called; stop returns how many ran and the errors of those that failed.
func runTransactions(n int, tx func() error) (stop func() (int64, []string)) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		txs    atomic.Int64
		mu     sync.Mutex
		failed []string
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := tx(); err != nil && ctx.Err() == nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
				txs.Add(1)
			}
		}()
	}
	return func() (int64, []string) {
		cancel()
		wg.Wait()
		return txs.Load(), failed
	}
}

// readThenWrite reads row id in a transaction, then updates it; the
// transaction waits afterBegin after its BEGIN and afterRead between the
// read and the write.
func readThenWrite(db *sql.DB, id int, afterBegin, afterRead time.Duration) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	time.Sleep(afterBegin)
	var c string
	if err := tx.QueryRow("SELECT c FROM t WHERE id = ?", id).Scan(&c); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("select: %w", err)
	}
	time.Sleep(afterRead)
	if _, err := tx.Exec("UPDATE t SET k = k + 1 WHERE id = ?", id); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("update: %w", err)
	}
	return tx.Commit()
}

// TestDDLCatchUpSparesWriters: the catch-up never fails an application's
// transaction with a deadlock. Writers update two of a few hot rows, the
// higher key first (so they cannot deadlock among themselves), while jobs
// add and drop an index; every hot row is dirty at every catch-up pass. A
// pass that share-locked its keys in key order and waited for a writer
// would hold the lower row that writer wants next, and InnoDB would fail
// the writer, the smaller transaction.
func TestDDLCatchUpSparesWriters(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, e.ddlOptions(", max_latency_pct: 0, chunk_rows: 500"))
	e.seed(t, 20000)
	app := e.open(t, e.app)
	const hot = 40
	stop := runTransactions(4, func() error {
		lo := 1 + rand.IntN(hot-1)
		return updateBoth(app, lo+1+rand.IntN(hot-lo), lo)
	})
	for i := range 3 {
		if err := <-goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)"); err != nil {
			stop()
			t.Fatalf("job %d: ALTER: %v", i, err)
		}
		if _, err := app.Exec("ALTER TABLE t DROP INDEX idx_c"); err != nil {
			stop()
			t.Fatalf("DROP INDEX: %v", err)
		}
	}
	txs, failed := stop()
	if len(failed) > 0 {
		t.Errorf("%d of %d transactions failed, first: %s", len(failed), txs, failed[0])
	}
	if n := strings.Count(e.proxy.stderr.String(), "ddl: swapped"); n != 3 {
		t.Errorf("%d swaps in the log, want 3", n)
	}
}

// updateBoth updates row first, then row second, in one transaction.
func updateBoth(db *sql.DB, first, second int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	for i, id := range []int{first, second} {
		if _, err := tx.Exec("UPDATE t SET k = k + 1 WHERE id = ?", id); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("update %d: %w", id, err)
		}
		if i == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return tx.Commit()
}
