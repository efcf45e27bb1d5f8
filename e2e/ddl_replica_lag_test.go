package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// TestDDLReplicaLagBoundedUnderLoad: a real replica of the backend
// (scripts/mariadb.sh replica), found by the job itself (replicas:
// user:password@discover, SHOW SLAVE HOSTS), while writers go through the
// proxy during the job. The replica's lag, measured independently with a
// heartbeat row the test writes on the primary every 100 ms and reads on
// the replica, stays under tableproxy_ddl_max_replica_lag (plus one
// measuring interval and the chunks under way) from the copy's start to
// the job's end: the index build included, which a replica applies only
// after the primary when it is one deferred ALTER. The job reports the lag
// it saw and how long it held the copy for it; after it, the replica has
// the index and the same rows.
func TestDDLReplicaLagBoundedUnderLoad(t *testing.T) {
	_, port, _ := strings.Cut(freePort(t), ":")
	rep := testdb.StartReplica(t, port, "tp_testddlreplica%.%")
	e := newDDLEnv(t)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, fmt.Sprintf("GRANT REPLICATION MASTER ADMIN ON *.* TO '%s'@'%s'", e.app.name, host)) // SHOW SLAVE HOSTS
	}
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, workers: 4, chunk_rows: 5000, old_table_retention: 0, binlog_user: %s, replicas: ['tproot:tproot@discover']}\n", e.admin.name))
	const rows = 600000
	e.seed(t, rows)
	e.backend.Exec(t, "ANALYZE TABLE `"+e.db+"`.t") // the estimate from sampled statistics, as on a table in use
	primary, direct := e.backend.Root(t), e.direct(t)
	replica := testdb.Open(t, testdb.DSN(rep.Addr(), "tproot", "tproot", e.db, nil))
	mustExec(t, direct, "CREATE TABLE hb (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL)")
	mustExec(t, direct, "INSERT INTO hb VALUES (1, NOW(6))")
	caughtUp := func(timeout time.Duration) {
		var pos string
		if err := primary.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		var r int
		if err := replica.QueryRow("SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds()).Scan(&r); err != nil || r != 0 {
			t.Fatalf("the replica did not catch up within %v: %v, %v", timeout, r, replicaError(replica))
		}
	}
	caughtUp(120 * time.Second)

	app, admin := e.open(t, e.app), e.open(t, e.admin)
	const limit = 1
	mustExec(t, admin, fmt.Sprintf("SET GLOBAL tableproxy_ddl_max_replica_lag = %d", limit))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() { // the foreground, through the proxy
			defer wg.Done()
			for ctx.Err() == nil {
				id := 1 + rand.IntN(rows)
				if _, err := app.ExecContext(ctx, "UPDATE t SET k = k + 1 WHERE id = ?", id); err == nil {
					writes.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var (
		mu       sync.Mutex
		samples  []time.Duration // the replica's lag, from the heartbeat
		watching atomic.Bool     // from the copy's start to the job's end
	)
	wg.Add(1)
	go func() { // the heartbeat: written on the primary, read on the replica
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = direct.ExecContext(ctx, "UPDATE hb SET ts = NOW(6) WHERE id = 1")
			var us int64
			if err := replica.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) FROM hb WHERE id = 1").Scan(&us); err == nil && watching.Load() {
				mu.Lock()
				samples = append(samples, time.Duration(us)*time.Microsecond)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second) // the foreground's latency before the job

	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitJob(t, admin, 60*time.Second, "the job to copy", func(j ddlJob) bool { return j.Stage == "backfill" })
	watching.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(300 * time.Second):
		t.Fatal("the job did not end")
	}
	caughtUp(120 * time.Second) // the heartbeat sees the job's last statements applied
	watching.Store(false)
	cancel()
	wg.Wait()

	mu.Lock()
	var worst time.Duration
	for _, s := range samples {
		worst = max(worst, s)
	}
	n := len(samples)
	mu.Unlock()
	var lagMax, holds int64
	var held, reps string
	if err := admin.QueryRow("SELECT replica_lag_max_ms, lag_holds, lag_held_seconds, replicas FROM tableproxy.ddl_jobs ORDER BY job_id DESC LIMIT 1").
		Scan(&lagMax, &holds, &held, &reps); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d foreground writes; replica lag from the copy to the job's end, by heartbeat: max %v over %d samples; the job saw max %d ms, held the copy %d times for %s s; replicas: %s",
		writes.Load(), worst.Round(time.Millisecond), n, lagMax, holds, held, reps)
	if n < 3 {
		t.Errorf("only %d heartbeat samples during the job", n)
	}
	// The throttle reads every throttleEvery (250 ms), and chunks under
	// way when it holds the copy still land: the bound plus half a second.
	// (A deferred build of k_idx and idx_c here made it 1.8 s.)
	if bound := time.Duration(limit)*time.Second + 500*time.Millisecond; worst > bound {
		t.Errorf("the replica lagged %v during the job; want at most %v", worst, bound)
	}
	// The progress is against the table's rows, counted as the copy
	// began (the writers only update), not the backend's statistics.
	if j, err := lastJob(admin); err != nil || j.Estimate != rows || j.RowsDone != rows {
		t.Errorf("the job's rows: %d copied of %d (estimated); want %d of %d (%v)", j.RowsDone, j.Estimate, rows, rows, err)
	}
	if !strings.Contains(reps, rep.Addr()+": ") {
		t.Errorf("the job's replicas %q do not name the discovered replica %s", reps, rep.Addr())
	}
	if !strings.Contains(e.proxy.stderr.String(), "ddl: replica discovered") {
		t.Error("the log does not say the replica was discovered")
	}
	caughtUp(120 * time.Second)
	if ddl := showCreate(t, replica, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("the replica has no index:\n%s", ddl)
	}
	if a, b := tableSum(t, direct, "t"), tableSum(t, replica, "t"); a != b {
		t.Errorf("the replica's rows differ from the primary's: %s vs %s", b, a)
	}
}

// TestDDLReplicaGoneIsNotWaitedFor: a replica the job watches is killed
// during the copy. The copy waits for it for replica_timeout, then goes on
// without it; the log and tableproxy.ddl_jobs say it is gone, and the job
// succeeds.
func TestDDLReplicaGoneIsNotWaitedFor(t *testing.T) {
	e := newDDLEnv(t)
	rep, _ := e.privateReplica(t, "3")
	e.restartWith(t, e.ddlOptions(fmt.Sprintf(", chunk_rows: 500, replica_timeout: 2s, replicas: ['tproot:tproot@%s']", rep.Addr())))
	e.seed(t, 100000)
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	mustExec(t, admin, "SET GLOBAL tableproxy_ddl_max_replica_lag = 30")
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitJob(t, admin, 60*time.Second, "the job to copy", func(j ddlJob) bool { return j.Stage == "backfill" && j.RowsDone > 0 })
	rep.Signal(t, syscall.SIGKILL)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("the job waited for the dead replica")
	}
	log := e.proxy.stderr.String()
	if !strings.Contains(log, "ddl: replica gone; the copy no longer waits for it") {
		t.Errorf("the log does not say the replica is gone:\n%s", grepLines(log, "replica"))
	}
	var reps string
	if err := admin.QueryRow("SELECT replicas FROM tableproxy.ddl_jobs ORDER BY job_id DESC LIMIT 1").Scan(&reps); err != nil || !strings.Contains(reps, rep.Addr()+": gone since") {
		t.Errorf("ddl_jobs.replicas = %q, %v; want the replica shown gone", reps, err)
	}
}
