package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDDLProgressReports: a client that asks for MariaDB's progress
// reports (libmariadb with a progress callback, as the mariadb client
// sets) gets them while its ALTER runs as a job, stage by stage, then OK.
func TestDDLProgressReports(t *testing.T) {
	bin := buildC(t, "ddlprogress/progress.c")
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 6000)
	p := e.launchDDL(t, ", chunk_rows: 500", "backfill:2500ms")
	host, port := splitAddr(t, p.addr)
	cmd := exec.Command(bin, host, port, e.app.name, e.app.password, e.db, "ALTER TABLE t ADD INDEX idx_c (c)")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.Output()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the client did not finish")
	}
	if err != nil {
		t.Fatalf("progress client: %v\n%s", err, out)
	}
	t.Logf("client output:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[len(lines)-1] != "ok" {
		t.Errorf("outcome: %q", lines[len(lines)-1])
	}
	if !regexp.MustCompile(`(?m)^progress stage=4 max=10 percent=\d+\.\d info=backfill$`).Match(out) {
		t.Errorf("no report of the copy stage:\n%s", out)
	}
	if ddl := showCreate(t, e.direct(t), "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLWatch: `tableproxy ddl watch` shows a running job with its
// stage, a progress bar, rows, rate and ETA, to an admin through ADMIN
// SHOW DDL JOBS.
func TestDDLWatch(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 20000)
	p := e.launchDDL(t, ", chunk_rows: 500", "backfill:20s")
	app := e.openVia(t, p, e.app)
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitLog(t, p, 30*time.Second, "stalled for a fault test")
	time.Sleep(300 * time.Millisecond) // the chunks under way are counted
	out, err := exec.Command(proxyBin, "ddl", "watch", "--addr", p.addr, "--user", e.admin.name, "--password", e.admin.password, "--once").CombinedOutput()
	if err != nil {
		t.Fatalf("ddl watch: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`(?m)^#1 +` + regexp.QuoteMeta(e.db) + `\.t  add index  running +backfill +\[#*-+\] +\d+\.\d%  [1-9]\d*/\d+ rows  [1-9]\d* rows/s  ETA \d+`)
	if !re.Match(out) {
		t.Errorf("ddl watch output:\n%s", out)
	}
	t.Logf("ddl watch output:\n%s", out)
	// Without admin rights it reads tableproxy.ddl_jobs, which is there
	// without the cache plugin too.
	out, err = exec.Command(proxyBin, "ddl", "watch", "--addr", p.addr, "--user", e.app.name, "--password", e.app.password, "--once").CombinedOutput()
	if err != nil || !strings.Contains(string(out), e.db+".t") || !strings.Contains(string(out), "running") {
		t.Errorf("ddl watch as a user: %v\n%s", err, out)
	}
	adminDDL(t, e.openVia(t, p, e.admin), "CANCEL", 1)
	wantError(t, <-done, 1317, "interrupted")
}
