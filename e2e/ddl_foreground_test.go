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

// TestDDLCutOverSparesTransactions: transactions through the proxy that
// read a row of the table and then write it, running all through the job,
// never fail. A transaction that had read the table when the cut-over's
// RENAME queued for it would deadlock with that RENAME on its write, and
// MariaDB would fail it with 1213; the cut-over holds transactions begun
// during it at their first statement on the table, and waits for those
// open before it to end.
func TestDDLCutOverSparesTransactions(t *testing.T) {
	e := newDDLEnv(t)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, fmt.Sprintf("GRANT PROCESS ON *.* TO '%s'@'%s'", e.app.name, host))
	}
	e.restartWith(t, e.ddlOptions(""))
	e.seed(t, 20000)
	app := e.open(t, e.app)
	ctx, stop := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		txs    atomic.Int64
		mu     sync.Mutex
		failed []string
	)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := readThenWrite(app, 1+rand.IntN(20000)); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
				txs.Add(1)
			}
		}()
	}
	err := <-goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("ALTER: %v", err)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d transactions failed, first: %s", len(failed), txs.Load(), failed[0])
	}
	if !strings.Contains(e.proxy.stderr.String(), "ddl: swapped") {
		t.Error("no swap in the log")
	}
}

// readThenWrite reads row id in a transaction, then updates it.
func readThenWrite(db *sql.DB, id int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	var c string
	if err := tx.QueryRow("SELECT c FROM t WHERE id = ?", id).Scan(&c); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("select: %w", err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := tx.Exec("UPDATE t SET k = k + 1 WHERE id = ?", id); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("update: %w", err)
	}
	return tx.Commit()
}
