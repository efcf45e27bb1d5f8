package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDDLResumeRedoesAtMostAChunkPerWorker kills the proxy (kill -9) in
// the middle of a copy, with a UNIQUE index to sort and writers changing
// the table throughout, far above the copy's checkpoint: the fault tests'
// hook saves it once an hour, so the watermark has not moved. The
// restarted proxy resumes the job, which keeps every range the stopped
// copy finished and copies again only those its workers were copying: at
// most one chunk per worker. The job then succeeds and the table holds
// exactly the reference's rows.
//
// Before the copy kept its finished ranges (a resume deleted and copied
// again everything above the watermark), this copied again every row
// copied before the kill.
func TestDDLResumeRedoesAtMostAChunkPerWorker(t *testing.T) {
	for _, method := range []string{"insert_select", "read_ahead"} {
		t.Run(method, func(t *testing.T) { testDDLResumeBound(t, method) })
	}
}

func testDDLResumeBound(t *testing.T, method string) {
	const (
		rows      = 200000
		chunkRows = 1000
		workers   = 2 // ddlOptions'
	)
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seedWithRef(t, rows)
	direct := e.direct(t)
	t.Setenv("TABLEPROXY_DDL_CHECKPOINT_EVERY", "1h")
	extra := fmt.Sprintf(", chunk_rows: %d, copy_method: %s", chunkRows, method)
	p := e.launchDDL(t, extra, "")
	app := e.openVia(t, p, e.app)
	admin := e.openVia(t, p, e.admin)

	m := startChurn(direct, rows, 7919)
	defer m.stop()
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c), ADD UNIQUE INDEX uq_u (u)")
	j := waitJob(t, admin, 60*time.Second, "the copy to pass a fifth of the table", func(j ddlJob) bool {
		past := slices.Index(ddlStages, j.Stage) > slices.Index(ddlStages, "backfill")
		return past || j.State != "running" || j.Stage == "backfill" && j.RowsDone >= rows/5
	})
	_ = p.cmd.Process.Kill()
	<-p.done
	<-done
	if j.Stage != "backfill" {
		t.Fatalf("the copy was over before the kill: %+v", j)
	}
	copied := j.RowsDone

	e.proxy = e.launchDDL(t, extra, "")
	admin = e.open(t, e.admin)
	j = waitJob(t, admin, 120*time.Second, "the job to end", func(j ddlJob) bool { return j.State != "running" && j.State != "paused" })
	time.Sleep(100 * time.Millisecond) // writes after the swap reach the new table
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	ddl := showCreate(t, direct, "t")
	if j.State != "done" || !strings.Contains(ddl, "KEY `idx_c` (`c`)") || !strings.Contains(ddl, "UNIQUE KEY `uq_u` (`u`)") {
		t.Errorf("job %+v; definition:\n%s", j, ddl)
	}
	if got, want := tableSum(t, direct, "t"), tableSum(t, direct, "ref"); got != want {
		t.Errorf("rows: %s, want %s; differences:\n%s", got, want, rowDiff(t, direct, "t", "ref"))
	}
	log := e.proxy.stderr.String()
	match := regexp.MustCompile(`copy resumed at its checkpoint.* rows_copied_again=(\d+)`).FindStringSubmatch(log)
	if match == nil {
		t.Fatalf("the resumed job did not log what it copied again")
	}
	again, _ := strconv.ParseInt(match[1], 10, 64)
	t.Logf("%s: killed with %d rows copied; the resume copied %d again (bound %d)", method, copied, again, workers*chunkRows)
	if again > workers*chunkRows {
		t.Errorf("the resume copied %d rows again, more than a chunk per worker (%d × %d)", again, workers, chunkRows)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "ddl: copy resumed") || strings.Contains(line, "unique index checked") {
			t.Log(line)
		}
	}
}
