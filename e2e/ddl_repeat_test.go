package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// keptJob is a finished job's row in tableproxy.ddl_jobs with what it keeps.
type keptJob struct {
	ID          int64
	State, Kept string
	Until       time.Time
}

func keptJobs(t *testing.T, e *ddlEnv) []keptJob {
	t.Helper()
	rows, err := e.open(t, e.app).Query("SELECT job_id, state, kept_table, kept_until FROM tableproxy.ddl_jobs WHERE table_name = 't'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var jobs []keptJob
	for rows.Next() {
		var j keptJob
		var until string
		if err := rows.Scan(&j.ID, &j.State, &j.Kept, &until); err != nil {
			t.Fatal(err)
		}
		if until != "" {
			if j.Until, err = time.Parse("2006-01-02 15:04:05", until); err != nil {
				t.Fatalf("kept_until %q: %v", until, err)
			}
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// tableExists reports whether the environment's database has table name.
func tableExists(t *testing.T, e *ddlEnv, name string) bool {
	t.Helper()
	var n int
	if err := e.direct(t).QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestDDLRepeatedAddIndex: with the default retention (the original kept
// for 24 hours), index after index on one table succeeds, as a migration
// framework sends them, each job keeping its own original, listed with
// when it goes. ADMIN DROP DDL KEPT TABLES drops them early, for admins
// only.
func TestDDLRepeatedAddIndex(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, workers: 2, binlog_user: %s}\n", e.admin.name))
	e.seed(t, 20000)
	direct, app, admin := e.direct(t), e.open(t, e.app), e.open(t, e.admin)
	want := tableSum(t, direct, "t")
	indexes := []string{"ADD INDEX ic (c)", "ADD INDEX ik (k, c)", "ADD UNIQUE INDEX uu (u)"}
	for _, ix := range indexes {
		if _, err := app.Exec("ALTER TABLE t " + ix); err != nil {
			t.Fatalf("ALTER TABLE t %s: %v", ix, err)
		}
	}
	ddl := showCreate(t, direct, "t")
	for _, key := range []string{"KEY `ic` (`c`)", "KEY `ik` (`k`,`c`)", "UNIQUE KEY `uu` (`u`)"} {
		if !strings.Contains(ddl, key) {
			t.Errorf("missing %s:\n%s", key, ddl)
		}
	}
	if got := tableSum(t, direct, "t"); got != want {
		t.Errorf("rows after three jobs: %s, want %s", got, want)
	}

	jobs := keptJobs(t, e)
	if len(jobs) != len(indexes) {
		t.Fatalf("jobs: %+v", jobs)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		if j.State != "done" || j.Kept == "" || seen[j.Kept] || !tableExists(t, e, j.Kept) {
			t.Errorf("job %+v: want done, keeping a table of its own that exists", j)
		}
		seen[j.Kept] = true
		if d := time.Until(j.Until); d < 23*time.Hour || d > 25*time.Hour {
			t.Errorf("job %d keeps %s until %v, want in 24 hours", j.ID, j.Kept, j.Until)
		}
		// The kept original is the table as it was before the job.
		if got := tableSum(t, direct, j.Kept); got != want {
			t.Errorf("kept %s: %s, want %s", j.Kept, got, want)
		}
	}
	list, err := showJobs(admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range list {
		if j.Strategy.String != "backfill" || j.StrategyReason.String != "set: tableproxy_ddl_strategy = backfill" || j.Kept.String != jobs[i].Kept || !j.KeptUntil.Valid {
			t.Errorf("ADMIN SHOW DDL JOBS row %d: strategy %q (%q), kept %v until %v; want backfill, %s", i, j.Strategy.String, j.StrategyReason.String, j.Kept, j.KeptUntil, jobs[i].Kept)
		}
	}

	_, err = app.Exec("ADMIN DROP DDL KEPT TABLES")
	wantError(t, err, 1227, "admin privilege")
	var id int64
	var kept, result string
	if err := admin.QueryRow(fmt.Sprintf("ADMIN DROP DDL KEPT TABLES %d", jobs[1].ID)).Scan(&id, &kept, &result); err != nil {
		t.Fatal(err)
	}
	if id != jobs[1].ID || kept != jobs[1].Kept || result != "dropped" || tableExists(t, e, kept) {
		t.Errorf("ADMIN DROP DDL KEPT TABLES %d: %d %s %s", jobs[1].ID, id, kept, result)
	}
	var missing string
	if err := admin.QueryRow("ADMIN DROP DDL KEPT TABLES 999").Scan(&id, new(any), &missing); err != nil || !strings.Contains(missing, "not found") {
		t.Errorf("ADMIN DROP DDL KEPT TABLES 999: %q, %v", missing, err)
	}
	rows, err := admin.Query("ADMIN DROP DDL KEPT TABLES")
	if err != nil {
		t.Fatal(err)
	}
	var dropped []string
	for rows.Next() {
		if err := rows.Scan(&id, &kept, &result); err != nil {
			t.Fatal(err)
		}
		dropped = append(dropped, fmt.Sprintf("%d %s %s", id, kept, result))
	}
	rows.Close()
	// Oldest first; jobs is newest first, as the table lists them.
	if wantDropped := fmt.Sprintf("%d %s dropped, %d %s dropped", jobs[2].ID, jobs[2].Kept, jobs[0].ID, jobs[0].Kept); strings.Join(dropped, ", ") != wantDropped {
		t.Errorf("ADMIN DROP DDL KEPT TABLES: %v, want %s", dropped, wantDropped)
	}
	for _, j := range keptJobs(t, e) {
		if j.Kept != "" || !j.Until.IsZero() || tableExists(t, e, jobs[0].Kept) {
			t.Errorf("after the drops: %+v", j)
		}
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLKeptTableDroppedAfterRestart: a kept original whose retention
// ends while its proxy is down is dropped when the proxy is back.
func TestDDLKeptTableDroppedAfterRestart(t *testing.T) {
	e := newDDLEnv(t)
	section := fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, old_table_retention: 4s, binlog_user: %s}\n", e.admin.name)
	e.restartWith(t, section)
	e.seed(t, 5000)
	if _, err := e.open(t, e.app).Exec("ALTER TABLE t ADD INDEX ic (c)"); err != nil {
		t.Fatal(err)
	}
	jobs := keptJobs(t, e)
	if len(jobs) != 1 || jobs[0].Kept == "" {
		t.Fatalf("jobs: %+v", jobs)
	}
	e.proxy.stop(t)
	time.Sleep(time.Until(jobs[0].Until.Add(time.Second)))
	if !tableExists(t, e, jobs[0].Kept) {
		t.Fatalf("%s is gone with its proxy down", jobs[0].Kept)
	}
	e.restartWith(t, section)
	waitFor(t, 10*time.Second, "the kept table to be dropped", func() (bool, error) {
		return !tableExists(t, e, jobs[0].Kept), nil
	})
	if j := keptJobs(t, e); len(j) != 1 || j[0].Kept != "" {
		t.Errorf("after the drop: %+v", j)
	}
}

// TestDDLLongTableName: a name with no room for the job's dated names gets
// compact ones; a name with no room even for those goes native under the
// auto strategy, and is refused, saying why, when backfill is asked for.
func TestDDLLongTableName(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {binlog_user: %s}\n", e.admin.name))
	long := strings.Repeat("l", 55)
	longest := strings.Repeat("m", 64)
	for _, name := range []string{long, longest} {
		e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.`"+name+"` "+ddlTestTable,
			fmt.Sprintf("INSERT INTO `%s`.`%s` (id, k, c, pad, u) SELECT seq, seq %% 10, CONCAT('row-', seq), MD5(seq), seq FROM mysql.seq_1_to_1000", e.db, name))
	}
	conn := e.session(t, "SET tableproxy_ddl_strategy = backfill", "ALTER TABLE `"+long+"` ADD INDEX ic (c)")
	ctx := t.Context()
	_, err := conn.ExecContext(ctx, "ALTER TABLE `"+longest+"` ADD INDEX ic (c)")
	wantError(t, err, 1235, "too long for the names of the job's shadow and kept tables")
	var kept, reason string
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT kept_table, strategy_reason FROM tableproxy.ddl_jobs WHERE table_name = '%s' AND state = 'done'", long)).Scan(&kept, &reason); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(kept, long+"__o") || reason != "set: tableproxy_ddl_strategy = backfill" {
		t.Errorf("the long name's job keeps %q (%s), want %s__o<id>", kept, reason, long)
	}
	if _, err := conn.ExecContext(ctx, "SET tableproxy_ddl_strategy = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE `"+longest+"` ADD INDEX ic (c)"); err != nil {
		t.Fatal(err)
	}
	var strategy string
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT strategy, strategy_reason FROM tableproxy.ddl_jobs WHERE table_name = '%s' AND state = 'done'", longest)).Scan(&strategy, &reason); err != nil {
		t.Fatal(err)
	}
	if strategy != "native" || !strings.Contains(reason, "too long") {
		t.Errorf("the longest name's job: %s (%s), want native for its name", strategy, reason)
	}
	if !strings.Contains(showCreate(t, e.direct(t), longest), "KEY `ic` (`c`)") {
		t.Error("no index on the longest name")
	}
}

// TestDDLKeptOriginalsOutOfTheSchema: with CREATE on kept_tables_schema, a
// job's kept original leaves the application's schema (SHOW TABLES there
// lists the table alone) and is named qualified in tableproxy.ddl_jobs;
// past kept_tables_max_bytes the oldest kept original goes first.
func TestDDLKeptOriginalsOutOfTheSchema(t *testing.T) {
	e := newDDLEnv(t)
	grantEverywhere(t, e.backend, "GRANT ALL ON `tableproxy_kept`.* TO %s", e.app.name)
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, workers: 2, kept_tables_max_bytes: 0, binlog_user: %s}\n", e.admin.name))
	e.seed(t, 20000)
	direct, app := e.direct(t), e.open(t, e.app)
	want := tableSum(t, direct, "t")
	if _, err := app.Exec("ALTER TABLE t ADD INDEX ic (c)"); err != nil {
		t.Fatal(err)
	}
	shown := func() []string {
		rows, err := app.Query("SHOW TABLES")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			_ = rows.Scan(&n)
			names = append(names, n)
		}
		return names
	}
	if names := shown(); fmt.Sprint(names) != "[t]" {
		t.Errorf("SHOW TABLES after the job: %v, want [t]", names)
	}
	jobs := keptJobs(t, e)
	if len(jobs) != 1 || !strings.HasPrefix(jobs[0].Kept, "tableproxy_kept."+e.db+"__t__old_") {
		t.Fatalf("kept: %+v, want tableproxy_kept.%s__t__old_...", jobs, e.db)
	}
	first := jobs[0].Kept
	schema, name, _ := strings.Cut(first, ".")
	if got := tableSum(t, direct, schema+"`.`"+name); got != want {
		t.Errorf("kept %s: %s, want the table as it was, %s", first, got, want)
	}
	var size int64
	if _, err := direct.Exec("ANALYZE TABLE `" + schema + "`.`" + name + "`"); err != nil {
		t.Fatal(err)
	}
	if err := direct.QueryRow("SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&size); err != nil {
		t.Fatal(err)
	}

	// Room for one kept original and a half: the second job's keeps the
	// newest, the oldest goes. (The index dropped first, so that the
	// second job keeps a table of the first's shape and size.)
	e.backend.Exec(t, "ALTER TABLE `"+e.db+"`.t DROP INDEX ic")
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {strategy: backfill, workers: 2, kept_tables_max_bytes: %d, binlog_user: %s}\n", size*3/2, e.admin.name))
	app = e.open(t, e.app)
	if _, err := app.Exec("ALTER TABLE t ADD INDEX ic (c)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the oldest kept original to go", func() (bool, error) {
		rows, err := app.Query("SELECT kept_table FROM tableproxy.ddl_jobs WHERE table_name = 't'")
		if err != nil {
			return false, err
		}
		defer rows.Close()
		var kept []string
		for rows.Next() {
			var k string
			_ = rows.Scan(&k)
			kept = append(kept, k)
		}
		held := 0
		for _, k := range kept {
			if k == first {
				held += 10
			} else if k != "" {
				held++
			}
		}
		return len(kept) == 2 && held == 1, fmt.Errorf("kept %q", kept)
	})
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&n); err != nil || n != 0 {
		t.Errorf("the oldest kept original %s is still there (%d, %v)", first, n, err)
	}
	if !strings.Contains(e.proxy.stderr.String(), "passed kept_tables_max_bytes") {
		t.Error("the drop was not logged")
	}
	_, _ = e.open(t, e.admin).Exec("ADMIN DROP DDL KEPT TABLES")
}
