package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDDLVariables: the jobs' knobs are system variables with the proxy's
// prefix. SET SESSION changes them for the session, SET GLOBAL (admins
// only) for new sessions; SELECT @@... and SHOW VARIABLES LIKE read them;
// bad names, scopes and values get MySQL's errors; a job runs with its
// session's values.
func TestDDLVariables(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 5000)
	ctx := context.Background()
	conn := e.session(t)
	admin := e.open(t, e.admin)
	one := func(q string) string {
		t.Helper()
		var v string
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	exec := func(db interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, q string) error {
		_, err := db.ExecContext(ctx, q)
		return err
	}
	// Defaults come from the plugin's options (workers: 4, chunk_rows: 2000).
	if got := one("SELECT @@tableproxy_ddl_workers"); got != "4" {
		t.Errorf("workers: %s", got)
	}
	if got := one("SELECT @@global.tableproxy_ddl_batch_size"); got != "2000" {
		t.Errorf("batch_size: %s", got)
	}
	for _, q := range []string{"SET SESSION tableproxy_ddl_workers = 3", "SET @@session.tableproxy_ddl_batch_size = 700",
		"SET tableproxy_ddl_strategy = 'BACKFILL', tableproxy_ddl_sort_memory = '32M'"} {
		if err := exec(conn, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var w, b int64
	var col1, col2 string
	rows, err := conn.QueryContext(ctx, "SELECT @@tableproxy_ddl_workers, @@session.tableproxy_ddl_batch_size AS b")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	col1, col2 = cols[0], cols[1]
	rows.Next()
	if err := rows.Scan(&w, &b); err != nil || w != 3 || b != 700 || col1 != "@@tableproxy_ddl_workers" || col2 != "b" {
		t.Errorf("session values: %s=%d %s=%d %v", col1, w, col2, b, err)
	}
	rows.Close()
	if got := one("SELECT @@tableproxy_ddl_sort_memory"); got != "33554432" {
		t.Errorf("sort_memory: %s", got)
	}
	// Other sessions keep the global values.
	if got := one("SELECT @@global.tableproxy_ddl_workers"); got != "4" {
		t.Errorf("global workers after SET SESSION: %s", got)
	}
	var n int
	if err := admin.QueryRow("SELECT @@tableproxy_ddl_workers").Scan(&n); err != nil || n != 4 {
		t.Errorf("another session's workers: %d %v", n, err)
	}
	// SHOW VARIABLES lists them all, session values in the session.
	show := map[string]string{}
	srows, err := conn.QueryContext(ctx, "SHOW VARIABLES LIKE 'tableproxy_ddl%'")
	if err != nil {
		t.Fatal(err)
	}
	for srows.Next() {
		var name, v string
		srows.Scan(&name, &v)
		show[name] = v
	}
	srows.Close()
	if len(show) != 14 || show["tableproxy_ddl_postpone_cutover"] != "OFF" || show["tableproxy_ddl_workers"] != "3" || show["tableproxy_ddl_strategy"] != "backfill" ||
		show["tableproxy_ddl_max_threads_running"] != "0" || show["tableproxy_ddl_max_latency_pct"] != "150" || !strings.HasSuffix(show["tableproxy_ddl_temp_dir"], "/ddl-tmp") {
		t.Errorf("SHOW VARIABLES: %v", show)
	}
	var name, value string
	if err := conn.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'tableproxy\\_ddl\\_workers'").Scan(&name, &value); err != nil ||
		name != "tableproxy_ddl_workers" || value != "4" {
		t.Errorf("SHOW GLOBAL VARIABLES: %s=%s %v", name, value, err)
	}
	// Errors, as MySQL gives them.
	for _, tc := range []struct {
		db interface {
			ExecContext(context.Context, string, ...any) (sql.Result, error)
		}
		q    string
		code uint16
		msg  string
	}{
		{conn, "SET tableproxy_ddl_nope = 1", 1193, "Unknown system variable 'tableproxy_ddl_nope'"},
		{conn, "SET tableproxy_ddl_workers = 0", 1231, "Variable 'tableproxy_ddl_workers' can't be set to the value of '0'"},
		{conn, "SET tableproxy_ddl_workers = 'many'", 1232, "Incorrect argument type to variable 'tableproxy_ddl_workers'"},
		{conn, "SET tableproxy_ddl_strategy = 'fast'", 1231, "can't be set to the value of 'fast'"},
		{conn, "SET tableproxy_ddl_max_threads_running = 10", 1229, "is a GLOBAL variable and should be set with SET GLOBAL"},
		{conn, "SET GLOBAL tableproxy_ddl_workers = 2", 1227, "SUPER privilege"},
		{conn, "SET tableproxy_ddl_workers = 2, sql_mode = ''", 1235, "SET statement of their own"},
		{conn, "SELECT @@session.tableproxy_ddl_disk_quota", 1238, "is a GLOBAL variable"},
	} {
		wantError(t, exec(tc.db, tc.q), tc.code, tc.msg)
	}
	// A failed SET changes nothing; DEFAULT returns to the global value.
	if got := one("SELECT @@tableproxy_ddl_workers"); got != "3" {
		t.Errorf("workers after failed SETs: %s", got)
	}
	if err := exec(admin, "SET GLOBAL tableproxy_ddl_workers = 6"); err != nil {
		t.Fatal(err)
	}
	if err := exec(conn, "SET tableproxy_ddl_workers = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if got := one("SELECT @@tableproxy_ddl_workers"); got != "6" {
		t.Errorf("workers after DEFAULT: %s", got)
	}
	if err := exec(admin, "SET GLOBAL tableproxy_ddl_workers = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if got := one("SELECT @@tableproxy_ddl_workers"); got != "4" {
		t.Errorf("workers after SET GLOBAL ... DEFAULT: %s", got)
	}
	// A job takes its session's values.
	if err := exec(conn, "SET tableproxy_ddl_workers = 3"); err != nil {
		t.Fatal(err)
	}
	if err := exec(conn, "ALTER TABLE t ADD INDEX idx_c (c)"); err != nil {
		t.Fatal(err)
	}
	if log := e.proxy.stderr.String(); !strings.Contains(log, "workers=3 batch_size=700") {
		t.Errorf("the job did not run with its session's settings:\n%s", log)
	}
	// Other statements still reach the backend.
	if got := one("SELECT @@wait_timeout > 0"); got != "1" {
		t.Errorf("backend variable: %s", got)
	}
}

// TestDDLThrottle: the copy waits while the backend's Threads_running
// exceeds tableproxy_ddl_max_threads_running, or a configured replica does
// not replicate (here the backend itself, which is none); the job shows
// "throttled" and goes on when the DBA raises or clears the threshold.
func TestDDLThrottle(t *testing.T) {
	e := newDDLEnv(t)
	root := strings.SplitN(os.Getenv("TABLEPROXY_TEST_ROOT"), ":", 2)
	if len(root) != 2 {
		t.Skip("TABLEPROXY_TEST_ROOT is not user:password")
	}
	e.restartWith(t, e.ddlOptions(fmt.Sprintf(", chunk_rows: 500, replicas: ['%s:%s@%s']", root[0], root[1], e.backend.Addr)))
	e.seed(t, 20000)
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)
	for _, setting := range []string{"max_threads_running = 1", "max_replica_lag = 5"} {
		t.Run(strings.Fields(setting)[0], func(t *testing.T) {
			if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_" + setting); err != nil {
				t.Fatal(err)
			}
			// Two statements running on the backend hold Threads_running
			// above 1 until the test ends.
			sleepers, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 2 {
				go direct.ExecContext(sleepers, "SELECT SLEEP(20)")
			}
			before := showJobsCount(t, admin)
			done := goExec(app, "CREATE INDEX idx_"+strings.Fields(setting)[0]+" ON t (c)")
			waitJob(t, admin, 20*time.Second, "the job to be throttled", func(j ddlJob) bool {
				return int(j.ID) > before && j.State == "throttled"
			})
			// Chunks under way when the throttle began finish; then nothing moves.
			time.Sleep(500 * time.Millisecond)
			j, _ := lastJob(admin)
			time.Sleep(700 * time.Millisecond)
			j2, _ := lastJob(admin)
			if j2.State != "throttled" || j2.RowsDone != j.RowsDone {
				t.Errorf("throttled job moved: %+v then %+v", j, j2)
			}
			if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_" + strings.Fields(setting)[0] + " = 0"); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if log := e.proxy.stderr.String(); !strings.Contains(log, "copy throttled") {
				t.Errorf("no throttle in the log")
			}
		})
	}
}

func showJobsCount(t *testing.T, admin *sql.DB) int {
	t.Helper()
	jobs, err := showJobs(admin)
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

// TestDDLNativeStrategy: with tableproxy_ddl_strategy = native, the
// proxy runs the backend's own online ALTER as a job. While a transaction
// holds the table, the ALTER gives up after lock_wait_timeout each time
// (so statements queued behind it wait that long at most), retries, and
// finally reports the backend's 1205; once the table is free, it succeeds.
func TestDDLNativeStrategy(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 5000)
	ctx := context.Background()
	conn := e.session(t, "SET tableproxy_ddl_strategy = native", "SET tableproxy_ddl_lock_wait_timeout = 1", "SET tableproxy_ddl_native_retries = 3")
	admin, direct := e.open(t, e.admin), e.direct(t)
	tx, err := direct.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT * FROM t WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := conn.ExecContext(ctx, "ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	// A reader that comes while the ALTER waits is held no longer than
	// the ALTER's lock_wait_timeout.
	time.Sleep(300 * time.Millisecond)
	var maxWait time.Duration
	for time.Since(start) < 2*time.Second {
		t0 := time.Now()
		var n int
		if err := direct.QueryRow("SELECT COUNT(*) FROM t WHERE id < 10").Scan(&n); err != nil {
			t.Fatal(err)
		}
		maxWait = max(maxWait, time.Since(t0))
	}
	err = <-done
	tx.Rollback()
	wantError(t, err, 1205, "Lock wait timeout exceeded")
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s: no retries", took)
	}
	if maxWait > 1500*time.Millisecond {
		t.Errorf("a reader waited %s behind the ALTER", maxWait)
	}
	j, err := lastJob(admin)
	if err != nil || j.State != "failed" || j.Stage != "native" {
		t.Errorf("failed job: %+v %v", j, err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE t ADD INDEX idx_c (c)"); err != nil {
		t.Fatal(err)
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
	if j, err := lastJob(admin); err != nil || j.State != "done" || j.Stage != "done" {
		t.Errorf("job: %+v %v", j, err)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// session is one connection of the application user through the proxy,
// closed when the test ends, after running stmts.
func (e *ddlEnv) session(t *testing.T, stmts ...string) *sql.Conn {
	t.Helper()
	conn, err := e.open(t, e.app).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, q := range stmts {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return conn
}
