package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ddlStages are the stages of a job, in order, where the fault tests stop
// it (the proxy's TABLEPROXY_DDL_STALL hook holds the job at a point inside
// the stage where part of its work is done).
var ddlStages = []string{"preflight", "shadow", "binlog", "backfill", "sort", "catch-up", "build", "verify", "cut-over", "cleanup"}

// launchDDL starts a proxy with the ddloffload plugin (options extra) that
// the test may kill: it is not stopped for the test. stall sets the
// TABLEPROXY_DDL_STALL hook of that process ("" for none).
func (e *ddlEnv) launchDDL(t *testing.T, extra, stall string) *proxyProc {
	t.Helper()
	return e.launchWith(t, e.ddlOptions(extra), stall)
}

// launchWith is launchDDL with plugins (a YAML list under "plugins:").
func (e *ddlEnv) launchWith(t *testing.T, plugins, stall string) *proxyProc {
	t.Helper()
	t.Setenv("TABLEPROXY_DDL_STALL", stall)
	cfg := filepath.Join(t.TempDir(), "tableproxy.yaml")
	if err := writeFile(cfg, "plugins:\n"+plugins); err != nil {
		t.Fatal(err)
	}
	p := launchProxy(t, cfg, e.dataDir, e.backend.Addr, freePort(t), []account{e.app}, []account{e.admin})
	if err := p.waitReady(15 * time.Second); err != nil {
		_ = p.cmd.Process.Kill()
		t.Fatalf("%v\n%s", err, p.stderr.String())
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("proxy stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// waitLog waits until the proxy has logged s.
func waitLog(t *testing.T, p *proxyProc, timeout time.Duration, s string) {
	t.Helper()
	waitFor(t, timeout, "the proxy to log "+s, func() (bool, error) {
		return strings.Contains(p.stderr.String(), s), nil
	})
}

// TestDDLFaults stops a job in each stage in turn, by killing the proxy
// (kill -9), cancelling the job or pausing it there, while a writer changes
// the table directly on the backend throughout. Every write is made again
// to a reference table; afterwards the table holds exactly the reference's
// rows, has the new index if and only if the job succeeded, and no shadow
// or old table is left.
//
//   - kill: the restarted proxy resumes the job from its checkpoint (or
//     settles a job whose swap happened), and it succeeds;
//   - cancel: the job is rolled back, its client gets 1317 (in cleanup,
//     once swapped, the cancel is refused and the job succeeds);
//   - pause: the job stops at its next check and stays there until resumed,
//     then succeeds (from the cut-over on, the pause is refused).
func TestDDLFaults(t *testing.T) {
	for _, fault := range []string{"kill", "cancel", "pause"} {
		for _, stage := range ddlStages {
			t.Run(fault+"/"+stage, func(t *testing.T) { testDDLFault(t, fault, stage) })
		}
	}
	// A clean stop (SIGTERM) ends the job's work at once and leaves it to
	// the next start, as kill -9 does, but the proxy exits 0.
	for _, stage := range []string{"backfill", "catch-up", "cut-over"} {
		t.Run("term/"+stage, func(t *testing.T) { testDDLFault(t, "term", stage) })
	}
}

func testDDLFault(t *testing.T, fault, stage string) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	rows := 4000
	if n, err := strconv.Atoi(os.Getenv("TABLEPROXY_DDL_FAULT_ROWS")); err == nil && n > 0 {
		rows = n // scripts/ddl-faults.sh runs the matrix on larger tables
	}
	e.seedWithRef(t, rows)
	direct := e.direct(t)
	stall := stage + ":30s"
	if fault == "pause" {
		stall = stage + ":1s"
	}
	p := e.launchDDL(t, ", chunk_rows: 300", stall)
	app := e.openVia(t, p, e.app)
	admin := e.openVia(t, p, e.admin)

	m := startChurn(direct, rows, 37)
	defer m.stop()
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c), ADD UNIQUE INDEX uq_u (u)")
	waitLog(t, p, 30*time.Second, `stalled for a fault test" job=1 table=`+e.db+".t stage="+stage)
	wantDone := true
	switch fault {
	case "kill", "term":
		if fault == "kill" {
			_ = p.cmd.Process.Kill()
			<-p.done
		} else {
			p.stop(t)
			wantError(t, <-done, 1053, "shutdown")
		}
		e.proxy = e.launchDDL(t, "", "")
		admin = e.open(t, e.admin)
	case "cancel":
		got := adminDDL(t, admin, "CANCEL", 1)
		if stage == "cleanup" {
			if !strings.Contains(got, "swapped") {
				t.Errorf("cancel in cleanup: %s", got)
			}
			break
		}
		if got != "successful" {
			t.Fatalf("cancel: %s", got)
		}
		wantDone = false
		wantError(t, <-done, 1317, "interrupted")
	case "pause":
		got := adminDDL(t, admin, "PAUSE", 1)
		if stage == "cut-over" || stage == "cleanup" {
			if !strings.Contains(got, "can't be paused now") {
				t.Errorf("pause in %s: %s", stage, got)
			}
			break
		}
		if got != "successful" {
			t.Fatalf("pause: %s", got)
		}
		// The stall ends after a second; the job then stops at its next
		// check and stays there.
		time.Sleep(1500 * time.Millisecond)
		j1, err := lastJob(admin)
		time.Sleep(500 * time.Millisecond)
		j2, err2 := lastJob(admin)
		if err != nil || err2 != nil || j1.State != "paused" || j2.State != "paused" || j1.Stage != j2.Stage || j1.RowsDone != j2.RowsDone {
			t.Errorf("paused job moved or is not paused: %+v then %+v (%v, %v)", j1, j2, err, err2)
		}
		if r := adminDDL(t, admin, "RESUME", 1); r != "successful" {
			t.Errorf("resume: %s", r)
		}
	}
	j := waitJob(t, admin, 60*time.Second, "the job to end", func(j ddlJob) bool { return j.State != "running" && j.State != "paused" })
	time.Sleep(100 * time.Millisecond) // writes after the swap reach the new table
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	ddl := showCreate(t, direct, "t")
	if wantDone {
		if j.State != "done" || !strings.Contains(ddl, "KEY `idx_c` (`c`)") || !strings.Contains(ddl, "UNIQUE KEY `uq_u` (`u`)") {
			t.Errorf("job %+v; definition:\n%s", j, ddl)
		}
	} else if j.State != "cancelled" || strings.Contains(ddl, "idx_c") || strings.Contains(ddl, "uq_u") {
		t.Errorf("job %+v; definition:\n%s", j, ddl)
	}
	if got, want := tableSum(t, direct, "t"), tableSum(t, direct, "ref"); got != want {
		t.Errorf("rows: %s, want %s; differences:\n%s", got, want, rowDiff(t, direct, "t", "ref"))
	}
	waitFor(t, 10*time.Second, "no tables left behind", func() (bool, error) {
		l := leftovers(t, direct)
		return len(l) == 0, fmt.Errorf("left: %v", l)
	})
	if (fault == "kill" || fault == "term") && stage != "cleanup" && !strings.Contains(e.proxy.stderr.String(), "resuming a job interrupted by a proxy stop") &&
		!strings.Contains(e.proxy.stderr.String(), `swapped=true`) {
		t.Errorf("the restarted proxy neither resumed nor settled the job")
	}
	// A job stopped in the copy or later goes on from its checkpoint.
	if fault == "kill" || fault == "term" {
		log := e.proxy.stderr.String()
		switch stage {
		case "backfill":
			if !regexp.MustCompile(`resuming a job .* checkpoint_rows=[1-9]`).MatchString(log) {
				t.Errorf("the job did not resume from a copy checkpoint")
			}
			// At most the chunk each of the 2 workers was copying.
			m := regexp.MustCompile(`copy resumed at its checkpoint.* rows_copied_again=(\d+)`).FindStringSubmatch(log)
			if m == nil {
				t.Errorf("the resumed copy did not log what it copied again")
			} else if again, _ := strconv.Atoi(m[1]); again > 2*300 {
				t.Errorf("the resumed copy copied again %d rows, more than a chunk per worker", again)
			}
		case "sort", "catch-up", "build", "verify":
			if !strings.Contains(log, "copy_done=true") || !strings.Contains(log, "rows_copied_again=0") {
				t.Errorf("the job copied again")
			}
		}
	}
	if testing.Verbose() {
		for _, line := range strings.Split(e.proxy.stderr.String(), "\n") {
			if strings.Contains(line, "ddl:") {
				t.Log(line)
			}
		}
	}
}

// TestDDLCutOverWhileShadowIsLocked: the shadow is under a metadata lock
// when the cut-over's RENAME is sent (InnoDB's purge and statistics threads
// take one for moments; here a transaction that read the shadow holds it).
// A writer that bypasses the proxy and sends a DELETE once the RENAME waits
// must not reach the original table after the shadow stopped following
// it: the row must be gone from the table the job leaves in place.
func TestDDLCutOverWhileShadowIsLocked(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 5000)
	p := e.launchDDL(t, "", "verify:2s")
	app := e.openVia(t, p, e.app)
	direct := e.direct(t)
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitLog(t, p, 60*time.Second, `stalled for a fault test" job=1 table=`+e.db+".t stage=verify")

	ctx := context.Background()
	holder, err := direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var shadow string
	if err := holder.QueryRowContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME NOT IN ('t')").Scan(&shadow); err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := holder.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+shadow+"` WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the cut-over's RENAME to wait for a metadata lock", func() (bool, error) {
		err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%RENAME TABLE%' AND STATE = 'Waiting for table metadata lock'").Scan(&n)
		return n > 0, err
	})
	time.Sleep(300 * time.Millisecond) // the job unlocks the table once it sees the RENAME wait
	deleted := goExec(direct, "DELETE FROM t WHERE id = 1")
	time.Sleep(500 * time.Millisecond)
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ALTER: %v", err)
	}
	if err := direct.QueryRow("SELECT COUNT(*) FROM t WHERE id = 1").Scan(&n); err != nil || n != 0 {
		t.Errorf("row 1, deleted during the cut-over, is in the table after it: %d %v", n, err)
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLVerifyFindsDefects: a shadow that differs from the table where no
// write explains it (a changed value, a missing row, an extra row) fails
// the job in its verify stage, and the table is left as it was, while
// writers keep changing other rows (so that ranges are also read again
// and compared with the table read-locked). The shadow is damaged while the job waits
// at the start of the verify.
func TestDDLVerifyFindsDefects(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.seed(t, 20000)
	p := e.launchDDL(t, ", max_latency_pct: 0", "verify:1s")
	app := e.openVia(t, p, e.app)
	direct := e.direct(t)
	damage := map[string]string{
		"changed": "UPDATE `%s` SET c = 'damaged' WHERE id = 15000",
		"missing": "DELETE FROM `%s` WHERE id = 9000",
		"extra":   "INSERT INTO `%s` (id, k, c, pad, u) VALUES (30000, 1, 'extra', 'extra', 30000)",
	}
	for i, name := range []string{"changed", "missing", "extra"} {
		t.Run(name, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { stop(); wg.Wait() }()
			wg.Add(1)
			go func() { // hot rows, far from the damaged ones
				defer wg.Done()
				for ctx.Err() == nil {
					_, _ = app.ExecContext(ctx, "UPDATE t SET k = k + 1 WHERE id = ?", 1+rand.IntN(50))
				}
			}()
			want := tableSumExcept(t, direct, 50)
			done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
			waitFor(t, 60*time.Second, "the job to stall in its verify", func() (bool, error) {
				return strings.Count(p.stderr.String(), "stalled for a fault test") > i, nil
			})
			shadow := shadowOf(direct, "t")
			if _, err := direct.Exec(fmt.Sprintf(damage[name], shadow)); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if err == nil || !strings.Contains(err.Error(), "differ where") {
				t.Fatalf("ALTER: %v, want the verify's error", err)
			}
			if ddl := showCreate(t, direct, "t"); strings.Contains(ddl, "idx_c") {
				t.Errorf("the index was added:\n%s", ddl)
			}
			if got := tableSumExcept(t, direct, 50); got != want {
				t.Errorf("the table changed: %s, want %s", got, want)
			}
			if l := leftovers(t, direct); len(l) > 0 {
				t.Errorf("left behind: %v", l)
			}
		})
	}
}

// tableSumExcept checksums t's rows with ids above skip (the writers
// change the others).
func tableSumExcept(t *testing.T, db *sql.DB, skip int) string {
	t.Helper()
	var n int
	var x uint64
	if err := db.QueryRow("SELECT COUNT(*), IFNULL(BIT_XOR(CRC32(CONCAT_WS('#', id, k, c, pad, u))), 0) FROM t WHERE id > ?", skip).Scan(&n, &x); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d/%x", n, x)
}

// startChurn writes to t and ref directly, the same statements to both,
// until stopped: inserts past the table's end, and updates (of the UNIQUE
// column u too) and deletes of ids spread by stride, one in three each.
func startChurn(direct *sql.DB, rows, stride int) *mirrored {
	next := rows
	return startMirrored([]*sql.DB{direct}, direct, func(_, i int) string {
		id := (i*stride)%rows + 1
		switch i % 3 {
		case 0:
			next++
			return fmt.Sprintf("INSERT INTO %%s (id, k, c, pad, u) VALUES (%d, 1, 'new', 'x', %d)", next, next)
		case 1:
			return fmt.Sprintf("UPDATE %%s SET c = CONCAT(LEFT(c, 50), '+'), u = u + 1000000 WHERE id = %d", id)
		}
		return fmt.Sprintf("DELETE FROM %%s WHERE id = %d", id)
	})
}

// seedWithRef creates t with rows rows, and ref, a copy of it that
// startChurn's writes keep equal to what t must hold.
func (e *ddlEnv) seedWithRef(t *testing.T, rows int) {
	t.Helper()
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t "+ddlTestTable,
		"CREATE TABLE `"+e.db+"`.ref "+ddlTestTable,
		"INSERT INTO `"+e.db+"`.t (id, k, c, pad, u) SELECT seq, seq % 100, CONCAT('row-', seq), MD5(seq), seq FROM mysql.seq_1_to_"+fmt.Sprint(rows),
		"INSERT INTO `"+e.db+"`.ref SELECT * FROM `"+e.db+"`.t")
}
