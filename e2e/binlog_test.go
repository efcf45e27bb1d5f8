package e2e

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// oneBinlogDump waits until the backend serves user one binary log dump,
// and checks that it stays one for a second.
func oneBinlogDump(t *testing.T, root *sql.DB, user, when string) {
	t.Helper()
	waitFor(t, 10*time.Second, "one binary log dump "+when, func() (bool, error) {
		n := testdb.BinlogDumps(t, root, user)
		return n == 1, fmt.Errorf("%d dumps", n)
	})
	for i := 0; i < 10; i++ {
		if n := testdb.BinlogDumps(t, root, user); n != 1 {
			t.Fatalf("%s: %d binary log dumps for the proxy, want 1", when, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBinlogOneStreamPerProxy: the cache and an ADD INDEX job follow the
// backend's binary log through one stream, so the backend serves the proxy
// one binary log dump while both follow it; and again after the proxy is
// killed in the job's copy and resumes the job from its checkpoint, an
// older position than the one the cache follows from. Writes that bypass
// the proxy reach both: the cached table's version goes up, and the new
// table holds the change.
func TestBinlogOneStreamPerProxy(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 20000)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.small (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+e.db+"`.small VALUES (1, 0)")
	root, direct := e.backend.Root(t), e.direct(t)
	plugins := "  - name: cache\n" + e.ddlOptions(", chunk_rows: 500")
	p := e.launchWith(t, plugins, "backfill:30s")
	admin := e.openVia(t, p, e.admin)
	if _, err := admin.Exec("ALTER TABLE small CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "small", 1)
	oneBinlogDump(t, root, e.admin.name, "with the cache following")

	done := goExec(e.openVia(t, p, e.app), "ALTER TABLE t ADD INDEX ik (k)")
	waitLog(t, p, 30*time.Second, `stalled for a fault test" job=1 table=`+e.db+".t stage=backfill")
	oneBinlogDump(t, root, e.admin.name, "with the cache and a job following")
	_, _, v0, _ := cachedState(t, admin, "small")
	if _, err := direct.Exec("UPDATE small SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec("UPDATE t SET c = 'bypass-1' WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "small", "ready", 1, v0+1)

	_ = p.cmd.Process.Kill()
	<-p.done
	<-done // (its client lost the connection)
	if _, err := direct.Exec("UPDATE t SET c = 'bypass-2' WHERE id = 8"); err != nil {
		t.Fatal(err)
	}
	p = e.launchWith(t, plugins, "")
	admin = e.openVia(t, p, e.admin)
	j := waitJob(t, admin, 60*time.Second, "the resumed job to end", func(j ddlJob) bool { return j.State != "running" && j.State != "paused" })
	if j.State != "done" || !strings.Contains(showCreate(t, direct, "t"), "KEY `ik` (`k`)") {
		t.Fatalf("the resumed job: %+v", j)
	}
	if !strings.Contains(p.stderr.String(), "resuming a job interrupted by a proxy stop") {
		t.Error("the restarted proxy did not resume the job")
	}
	for id, want := range map[int]string{7: "bypass-1", 8: "bypass-2"} {
		var c string
		if err := direct.QueryRow("SELECT c FROM t FORCE INDEX (ik) WHERE id = ? AND k = k", id).Scan(&c); err != nil || c != want {
			t.Errorf("row %d in the new table: %q, %v; want %q", id, c, err, want)
		}
	}
	waitSettled(t, admin, "small", 1)
	_, _, v1, _ := cachedState(t, admin, "small")
	if _, err := direct.Exec("UPDATE small SET v = 2 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "small", "ready", 1, v1+1)
	oneBinlogDump(t, root, e.admin.name, "after the restart")
}

// TestBinlogUserSetting: binlog_user (or --binlog-user) names the one user
// the proxy reads the binary log as, over the plugins' own binlog_user
// options of older configurations, which the log calls deprecated once.
func TestBinlogUserSetting(t *testing.T) {
	e := newDefaultsEnv(t, true)
	yaml := fmt.Sprintf("plugins:\n  - name: cache\n    options: {binlog_user: %s}\n  - name: ddloffload\n    options: {binlog_user: %s}\n", e.app.name, e.app.name)
	p := e.start(t, proxyOpts{yaml: yaml, flags: []string{"--binlog-user", e.admin.name}})
	waitLogs(t, p, `"feature cached tables: on" binlog_user=`+e.admin.name,
		`"feature online ADD INDEX: on" binlog_user=`+e.admin.name,
		`msg="the plugin option binlog_user is deprecated: set binlog_user at the top level (or --binlog-user)" plugins=cache,ddloffload binlog_user=`+e.admin.name)
	if n := strings.Count(p.stderr.String(), "is deprecated"); n != 1 {
		t.Errorf("%d deprecation lines, want 1", n)
	}
	p.stop(t)

	// The old option alone still names the user, over the first admin
	// (here one without the privileges the log needs).
	yaml = fmt.Sprintf("plugins:\n  - name: cache\n    options: {binlog_user: %s}\n", e.app.name)
	p = e.start(t, proxyOpts{yaml: yaml})
	waitLogs(t, p, "is deprecated", `"feature cached tables: limited: ALTER TABLE ... CACHE is refused (the cache option accept_stale_risk caches anyway)" binlog_user=`+e.app.name)
}
