package e2e

import (
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// restartWith stops the environment's proxy and starts one with plugins
// (a YAML list under "plugins:"), same users and data directory.
func (e *ddlEnv) restartWith(t *testing.T, plugins string) {
	t.Helper()
	e.proxy.stop(t)
	e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: "plugins:\n" + plugins, admins: []account{e.admin}, dataDir: e.dataDir})
}

// ddlOptions is the ddloffload plugin's section for the environment.
func (e *ddlEnv) ddlOptions(extra string) string {
	return fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, workers: 2, old_table_retention: 0, binlog_user: %s%s}\n", e.admin.name, extra)
}

// adminDDL runs ADMIN <verb> DDL JOBS id and returns its result column.
func adminDDL(t *testing.T, db *sql.DB, verb string, id int64) string {
	t.Helper()
	var got int64
	var result string
	if err := db.QueryRow(fmt.Sprintf("ADMIN %s DDL JOBS %d", verb, id)).Scan(&got, &result); err != nil {
		t.Fatalf("ADMIN %s DDL JOBS %d: %v", verb, id, err)
	}
	return result
}

// TestDDLJobsVirtualTable: any client sees jobs in tableproxy.ddl_jobs, and
// filters them with WHERE, while a job runs (here paused) and after it ends.
func TestDDLJobsVirtualTable(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, "  - name: cache\n"+e.ddlOptions(", chunk_rows: 1000"))
	e.seed(t, 30000)
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	id := waitJob(t, admin, 20*time.Second, "the job to copy", func(j ddlJob) bool { return j.Stage == "backfill" && j.RowsDone > 0 }).ID
	if r := adminDDL(t, admin, "PAUSE", id); r != "successful" {
		t.Fatalf("pause: %s", r)
	}
	// The application user, no admin, reads the table.
	var (
		gotID               int64
		table, state, stage string
		rowsDone, estimate  int64
		progress            string
	)
	waitFor(t, 10*time.Second, "the paused job in tableproxy.ddl_jobs", func() (bool, error) {
		err := app.QueryRow("SELECT job_id, table_name, state, stage, row_count, rows_estimated, progress FROM tableproxy.ddl_jobs WHERE state = 'paused'").
			Scan(&gotID, &table, &state, &stage, &rowsDone, &estimate, &progress)
		return err == nil && gotID == id && table == "t" && stage == "backfill" && rowsDone > 0 && estimate > 10000, err
	})
	if r := adminDDL(t, admin, "RESUME", id); r != "successful" {
		t.Fatalf("resume: %s", r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var query, end string
	if err := app.QueryRow(fmt.Sprintf("SELECT state, stage, progress, query, end_time, rows_estimated FROM tableproxy.ddl_jobs WHERE job_id = %d", id)).
		Scan(&state, &stage, &progress, &query, &end, &estimate); err != nil {
		t.Fatal(err)
	}
	if state != "done" || stage != "done" || progress != "100.0" || query != "ALTER TABLE t ADD INDEX idx_c (c)" || end == "" {
		t.Errorf("finished job: state=%s stage=%s progress=%s query=%q end=%q", state, stage, progress, query, end)
	}
	// The count, in slices of ten chunks (the last one empty here),
	// replaced the backend's estimate.
	if estimate != 30000 {
		t.Errorf("rows_estimated %d after the job, want the table's 30000 rows counted", estimate)
	}
	rows, err := app.Query("SELECT * FROM tableproxy.ddl_jobs")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	rows.Close()
	if fmt.Sprint(cols) != "[job_id db_name table_name job_type state stage row_count rows_estimated progress rate eta_seconds start_time end_time query error strategy strategy_reason kept_table kept_until cut_over blocked_by replica_lag_max_ms lag_holds lag_held_seconds replicas]" {
		t.Errorf("columns: %v", cols)
	}
}

// goExec runs one statement on db in the background; the channel gets its
// error.
func goExec(db *sql.DB, query string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := db.Exec(query)
		done <- err
	}()
	return done
}

// waitJob waits until the newest job satisfies cond, and returns it.
func waitJob(t *testing.T, admin *sql.DB, timeout time.Duration, what string, cond func(j ddlJob) bool) ddlJob {
	t.Helper()
	var j ddlJob
	waitFor(t, timeout, what, func() (bool, error) {
		var err error
		j, err = lastJob(admin)
		return err == nil && cond(j), fmt.Errorf("%+v %v", j, err)
	})
	return j
}
