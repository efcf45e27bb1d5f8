package e2e

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestSysbench runs a short oltp_read_write load (4 threads, 5 s, one
// table of 1000 rows, prepared statements) through the proxy. sysbench
// aborts on any error other than a deadlock or lock wait timeout, so a
// clean exit means no errors; it must also report no reconnects.
//
// Deadlocks (1213) are part of this workload: sysbench retries them and
// counts them as "ignored errors". Directly against MariaDB the same run
// has about one per hundred transactions, so they are bounded rather than
// forbidden.
func TestSysbench(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	sb := requireTool(t, "sysbench", "sysbench")
	host, port := splitAddr(t, e.proxy.addr)
	u := e.user()
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + u.name, "--mysql-password=" + u.password, "--mysql-db=" + e.db,
		"--tables=1", "--table-size=1000"}
	runSysbench(t, sb, 60*time.Second, append(common, "prepare")...)
	out := runSysbench(t, sb, 60*time.Second, append(common, "--threads=4", "--time=5", "--db-ps-mode=auto",
		"--report-interval=0", "run")...)

	tx := sysbenchCount(t, out, "transactions")
	ignored := sysbenchCount(t, out, "ignored errors")
	reconnects := sysbenchCount(t, out, "reconnects")
	t.Logf("sysbench through the proxy: %d transactions, %d ignored errors (deadlocks), %d reconnects", tx, ignored, reconnects)
	if tx == 0 {
		t.Errorf("no transactions completed\n%s", out)
	}
	if reconnects != 0 {
		t.Errorf("%d reconnects, want 0\n%s", reconnects, out)
	}
	if ignored*20 > tx {
		t.Errorf("%d ignored errors in %d transactions: more than 5%%, far above the backend's own deadlock rate\n%s", ignored, tx, out)
	}
}

func runSysbench(t *testing.T, sb string, timeout time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command(sb, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sysbench %s: %v\n%s", args[len(args)-1], err, out.String())
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("sysbench %s still running after %s\n%s", args[len(args)-1], timeout, out.String())
	}
	if bytes.Contains(out.Bytes(), []byte("FATAL")) {
		t.Fatalf("sysbench %s reported a fatal error\n%s", args[len(args)-1], out.String())
	}
	return out.String()
}

// sysbenchCount reads a counter from sysbench's report, e.g.
//
//	reconnects:                          0      (0.00 per sec.)
func sysbenchCount(t *testing.T, out, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `:\s+(\d+)\s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q line in the sysbench report\n%s", name, out)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
