package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDDLPostponedCutOver: with tableproxy_ddl_postpone_cutover = ON the
// job copies, builds and verifies, then waits "ready to cut over" while
// the application writes on; the writes reach the shadow as they come
// (the job keeps up with the binary log). The ALTER's client waits until
// ADMIN COMPLETE DDL JOBS says go; the index is then in place and no row
// is lost. A second job, started with tableproxy_ddl_async = ON, returns
// its id at once and cuts over at the time ADMIN COMPLETE ... AT gives.
func TestDDLPostponedCutOver(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 20000)
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)
	ctx := context.Background()
	conn, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION tableproxy_ddl_postpone_cutover = ON"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := conn.QueryRowContext(ctx, "SELECT @@tableproxy_ddl_postpone_cutover").Scan(&v); err != nil || v != "ON" {
		t.Fatalf("@@tableproxy_ddl_postpone_cutover: %q, %v", v, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, "ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	j := waitJob(t, admin, 60*time.Second, "the job to be ready to cut over", func(j ddlJob) bool {
		return j.CutOver.String == "ready to cut over"
	})
	if j.Stage != "cut-over" || j.State != "running" || j.Strategy.String != "backfill" {
		t.Errorf("ready job: %+v", j)
	}
	// Writes while it waits, through the proxy and around it.
	for i := 1; i <= 50; i++ {
		if _, err := app.Exec(fmt.Sprintf("UPDATE t SET c = 'waiting-%d' WHERE id = %d", i, i)); err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Exec(fmt.Sprintf("INSERT INTO t (k, c, pad) VALUES (%d, 'direct-%d', 'x')", i, i)); err != nil {
			t.Fatal(err)
		}
	}
	shadow := shadowOf(direct, "t")
	waitFor(t, 10*time.Second, "the shadow to have the writes made while it waits", func() (bool, error) {
		return rowDiff(t, direct, "t", shadow) == "", nil
	})
	select {
	case err := <-done:
		t.Fatalf("the ALTER returned before the word: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if ddl := showCreate(t, direct, "t"); strings.Contains(ddl, "idx_c") {
		t.Fatal("the index is in place before the word")
	}
	// Bad words: not admin, unknown job, bad time.
	_, err = app.Exec(fmt.Sprintf("ADMIN COMPLETE DDL JOBS %d", j.ID))
	wantError(t, err, 1227, "admin privilege")
	_, err = admin.Exec(fmt.Sprintf("ADMIN COMPLETE DDL JOBS %d AT 'tomorrow'", j.ID))
	wantError(t, err, 1292, "Incorrect datetime value")
	var id int64
	var result string
	if err := admin.QueryRow("ADMIN COMPLETE DDL JOBS 999999").Scan(&id, &result); err != nil || !strings.Contains(result, "not found") {
		t.Errorf("unknown job: %q, %v", result, err)
	}
	start := time.Now()
	if err := admin.QueryRow(fmt.Sprintf("ADMIN COMPLETE DDL JOBS %d", j.ID)).Scan(&id, &result); err != nil || result != "successful" {
		t.Fatalf("ADMIN COMPLETE DDL JOBS: %q, %v", result, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ALTER did not return after the word")
	}
	t.Logf("the ALTER returned %v after ADMIN COMPLETE", time.Since(start).Round(time.Millisecond))
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM t WHERE c LIKE 'waiting-%' OR c LIKE 'direct-%'").Scan(&n); err != nil || n != 100 {
		t.Errorf("writes made while the job waited: %d rows, %v (want 100)", n, err)
	}
	if j, _ := lastJob(admin); j.State != "done" || j.CutOver.String != "" {
		t.Errorf("after the word: %+v", j)
	}

	// Detached, with a scheduled cut-over.
	if _, err := conn.ExecContext(ctx, "SET SESSION tableproxy_ddl_async = ON"); err != nil {
		t.Fatal(err)
	}
	var jobID int64
	if err := conn.QueryRowContext(ctx, "ALTER TABLE t ADD INDEX idx_k2 (k, c)").Scan(&jobID); err != nil {
		t.Fatalf("detached ALTER: %v", err)
	}
	waitJob(t, admin, 60*time.Second, "the detached job to be ready", func(j ddlJob) bool {
		return j.ID == jobID && j.CutOver.String == "ready to cut over"
	})
	at := time.Now().Add(3 * time.Second).Truncate(time.Second)
	if err := admin.QueryRow(fmt.Sprintf("ADMIN COMPLETE DDL JOBS %d AT '%s'", jobID, at.Format("2006-01-02 15:04:05"))).Scan(&id, &result); err != nil ||
		!strings.HasPrefix(result, "cut-over at ") {
		t.Fatalf("ADMIN COMPLETE ... AT: %q, %v", result, err)
	}
	if j, _ := lastJob(admin); !strings.HasPrefix(j.CutOver.String, "ready to cut over, at ") {
		t.Errorf("scheduled: cut_over %q", j.CutOver.String)
	}
	j = waitJob(t, admin, 30*time.Second, "the scheduled job to end", func(j ddlJob) bool { return j.ID == jobID && j.State != "running" })
	if j.State != "done" {
		t.Fatalf("scheduled job: %+v", j)
	}
	var end time.Time
	if err := admin.QueryRow(fmt.Sprintf("SELECT end_time FROM tableproxy.ddl_jobs WHERE job_id = %d", jobID)).Scan(&end); err == nil && end.Before(at.UTC()) {
		t.Errorf("the scheduled job ended at %v, before %v", end, at.UTC())
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_k2` (`k`,`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
	// A native strategy cannot wait.
	if _, err := conn.ExecContext(ctx, "SET SESSION tableproxy_ddl_strategy = native"); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, "ALTER TABLE t ADD INDEX idx_pad (pad)")
	wantError(t, err, 1235, "postponed cut-over")
}

// TestDDLCutOverBackoffShowsBlocker: a transaction that bypasses the proxy
// holds a write on the table past several cut-over attempts. The job backs
// off (its waits grow), ADMIN SHOW DDL JOBS names the blocking connection
// in BLOCKED_BY and the attempt in CUT_OVER, and the job finishes once the
// transaction ends.
func TestDDLCutOverBackoffShowsBlocker(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	yaml := fmt.Sprintf("plugins:\n  - name: ddloffload\n    options: {strategy: backfill, workers: 2, old_table_retention: 0, cutover_hold: 500ms, cutover_attempts: 20, lock_wait_timeout: 1s, binlog_user: %s}\n", e.admin.name)
	e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	e.seed(t, 20000)
	// The job runs as the app user: PROCESS lets it see other sessions.
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, fmt.Sprintf("GRANT PROCESS ON *.* TO '%s'@'%s'", e.app.name, host))
	}
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)
	ctx := context.Background()
	holder, err := direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var holderID int64
	if err := holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&holderID); err != nil {
		t.Fatal(err)
	}
	// The job waits, ready, for the word (a postponed cut-over), so that
	// the transaction is open when the cut-over begins, and not before.
	alter, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer alter.Close()
	if _, err := alter.ExecContext(ctx, "SET SESSION tableproxy_ddl_postpone_cutover = ON"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := alter.ExecContext(ctx, "ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	j := waitJob(t, admin, 60*time.Second, "the job to be ready", func(j ddlJob) bool { return j.CutOver.String == "ready to cut over" })
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("UPDATE t SET c = 'held' WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	var result string
	if err := admin.QueryRow(fmt.Sprintf("ADMIN COMPLETE DDL JOBS %d", j.ID)).Scan(new(int64), &result); err != nil || result != "successful" {
		t.Fatalf("ADMIN COMPLETE DDL JOBS: %q, %v", result, err)
	}
	j = waitJob(t, admin, 60*time.Second, "the cut-over to retry, blocked", func(j ddlJob) bool {
		return strings.HasPrefix(j.CutOver.String, "retrying (attempt ") && j.BlockedBy.String != ""
	})
	if !strings.Contains(j.BlockedBy.String, fmt.Sprintf("connection %d ", holderID)) {
		t.Errorf("BLOCKED_BY %q does not name the holding connection %d", j.BlockedBy.String, holderID)
	}
	t.Logf("while blocked: CUT_OVER %q, BLOCKED_BY %q", j.CutOver.String, j.BlockedBy.String)
	time.Sleep(2 * time.Second)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the job did not finish after the transaction ended")
	}
	log := e.proxy.stderr.String()
	if !strings.Contains(log, `in=500ms`) || !strings.Contains(log, `in=1s`) {
		t.Errorf("the waits between attempts did not grow:\n%s", grepLines(log, "cut-over attempt abandoned"))
	}
	var c string
	if err := direct.QueryRow("SELECT c FROM t WHERE id = 7").Scan(&c); err != nil || c != "held" {
		t.Errorf("row 7 after the job: %q, %v", c, err)
	}
	if j, _ := lastJob(admin); j.State != "done" || j.BlockedBy.String != "" {
		t.Errorf("after the job: %+v", j)
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
