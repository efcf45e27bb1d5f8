package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMariaDBClient runs testdata/script.sql through the mariadb
// command-line client, directly and through the proxy, and requires
// byte-identical output: result sets, column metadata, affected rows,
// warnings, errors and LOAD DATA LOCAL INFILE statistics.
func TestMariaDBClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	cli := requireTool(t, "mariadb", "mariadb-client")
	script, err := os.ReadFile("testdata/script.sql")
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name string
		args []string
		// want are lines each run's stdout must contain, so that a run
		// that printed nothing (or the same wrong thing twice) fails.
		want []string
	}{
		// Tab-separated results, values as the server sent them. (This
		// client prints --column-type-info only in table mode or with -v.)
		{"batch", []string{"--batch", "--column-type-info"}, []string{
			"still connected",
			"18446744073709551615\t-9223372036854775808\t0.33333333333333",
			"😀🎉",
			"Warning\t1262\tRow 5 was truncated; it contained more data than there were input columns",
		}},
		// Echoed statements, column metadata, affected rows, matched and
		// changed rows, warnings after every statement, LOAD DATA records.
		{"verbose", []string{"--batch", "--column-type-info", "-vvv", "--show-warnings"}, []string{
			"Query OK, 1 row affected, 2 warnings",
			"Rows matched: 1  Changed: 0  Warnings: 0",
			"Records: 8  Deleted: 0  Skipped: 0  Warnings: 5",
			"Warning (Code 1264): Out of range value for column 'qty' at row 1",
			"Type:       NEWDECIMAL",
			"Flags:      UNSIGNED BINARY NUM",
			// MariaDB's extended column metadata, which the client only
			// gets when the capability is negotiated end to end.
			"Type:       BLOB (format=json)",
		}},
	}
	// The errors the client continues past under --force, as the backend
	// words them.
	wantErrs := []*regexp.Regexp{
		regexp.MustCompile(`ERROR 1146 \(42S02\) at line \d+: Table '` + regexp.QuoteMeta(e.db) + `\.no_such_table' doesn't exist\n`),
		regexp.MustCompile(`ERROR 1062 \(23000\) at line \d+: Duplicate entry '1' for key 'PRIMARY'\n`),
		regexp.MustCompile(`ERROR 1064 \(42000\) at line \d+: You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near 'SELEC 1' at line 1\n`),
	}
	for _, r := range runs {
		var outs [2]cliResult
		for i, ep := range e.endpoints() {
			// Each run starts from an empty database of the same name, so
			// that names in messages and metadata agree.
			e.backend.Exec(t, "DROP DATABASE `"+e.db+"`", "CREATE DATABASE `"+e.db+"`")
			outs[i] = runCLI(t, cli, ep, e.user(), e.db, script, r.args)
		}
		direct, proxied := outs[0], outs[1]
		for _, w := range r.want {
			if !strings.Contains(direct.stdout, w) {
				t.Errorf("%s: direct output lacks %q; the script or the backend changed", r.name, w)
			}
		}
		for _, w := range wantErrs {
			if !w.MatchString(direct.stderr) {
				t.Errorf("%s: direct errors lack %q\nstderr:\n%s", r.name, w, direct.stderr)
			}
		}
		if proxied.code != direct.code {
			t.Errorf("%s: exit status through the proxy %d, direct %d", r.name, proxied.code, direct.code)
		}
		if d := firstDiff(direct.stderr, proxied.stderr); d != "" {
			t.Errorf("%s: stderr differs (direct vs proxy):\n%s", r.name, d)
		}
		if d := firstDiff(direct.stdout, proxied.stdout); d != "" {
			t.Errorf("%s: stdout differs (direct vs proxy):\n%s", r.name, d)
		}
	}
}

// TestMariaDBClientLosesAKilledStatementAsDirect: when the backend
// connection under a running statement is killed (KILL on the backend, as
// a DBA or a watchdog does), the mariadb client reports what it reports
// without the proxy: its own lost-connection error, not a packet it cannot
// read.
func TestMariaDBClientLosesAKilledStatementAsDirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	cli := requireTool(t, "mariadb", "mariadb-client")
	root := e.backend.Root(t)
	var outs [2]cliResult
	for i, ep := range e.endpoints() {
		tag := "killed_" + ep.name
		// Without TLS on both (the backend offers it, this proxy does
		// not): over TLS the client words a closed socket differently.
		wait := startCLI(t, cli, ep, e.user(), e.db, []byte("SELECT SLEEP(60) AS "+tag+";\n"), []string{"--skip-ssl"})
		var id int64
		waitFor(t, 20*time.Second, "the statement to reach the backend", func() (bool, error) {
			err := root.QueryRow("SELECT id FROM information_schema.processlist WHERE info LIKE ? AND id <> CONNECTION_ID()",
				"%AS "+tag+"%").Scan(&id)
			return err == nil, err
		})
		if _, err := root.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
		outs[i] = wait()
		outs[i].stderr = strings.ReplaceAll(outs[i].stderr, tag, "killed")
	}
	direct, proxied := outs[0], outs[1]
	if !strings.Contains(direct.stderr, "ERROR 2013 (HY000)") {
		t.Errorf("direct: %q, want the client's error 2013; the client or the backend changed", direct.stderr)
	}
	if proxied.stderr != direct.stderr || proxied.code != direct.code {
		t.Errorf("through the proxy: exit %d, %q; direct: exit %d, %q", proxied.code, proxied.stderr, direct.code, direct.stderr)
	}
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// timing matches the client's elapsed-time report, "(0.001 sec)", the only
// part of its output that legitimately differs between runs.
var timing = regexp.MustCompile(`\(\d+\.\d+ sec\)`)

func runCLI(t *testing.T, cli string, ep endpoint, u account, db string, script []byte, extra []string) cliResult {
	t.Helper()
	return startCLI(t, cli, ep, u, db, script, extra)()
}

// startCLI starts the mariadb client on script and returns a function that
// waits for it to end.
func startCLI(t *testing.T, cli string, ep endpoint, u account, db string, script []byte, extra []string) (wait func() cliResult) {
	t.Helper()
	host, port := splitAddr(t, ep.addr)
	args := append([]string{"--no-defaults", "-h", host, "-P", port, "-u", u.name, "-p" + u.password,
		"--default-character-set=utf8mb4", "--local-infile=1", "--force", "--connect-timeout=5"}, extra...)
	args = append(args, db)
	cmd := exec.Command(cli, args...)
	cmd.Dir = "." // LOAD DATA LOCAL INFILE names testdata/items.tsv relative to this
	cmd.Stdin = bytes.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	return func() cliResult {
		t.Helper()
		return waitCLI(t, ep, cmd, done, &stdout, &stderr)
	}
}

func waitCLI(t *testing.T, ep endpoint, cmd *exec.Cmd, done <-chan error, stdout, stderr *bytes.Buffer) cliResult {
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: mariadb client still running after 60s\nstdout:\n%s\nstderr:\n%s", ep.name, stdout.String(), stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", ep.name, err)
	}
	return cliResult{
		stdout: timing.ReplaceAllString(stdout.String(), "(N sec)"),
		stderr: timing.ReplaceAllString(stderr.String(), "(N sec)"),
		code:   code,
	}
}

// firstDiff describes how two outputs differ, or returns "" when they are
// equal: every differing line (up to ten) when they have the same number of
// lines, otherwise the first difference with context.
func firstDiff(want, got string) string {
	if want == got {
		return ""
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	if len(wl) == len(gl) {
		n := 0
		for i := range wl {
			if wl[i] == gl[i] {
				continue
			}
			if n++; n > 10 {
				b.WriteString("(more differences left out)\n")
				break
			}
			fmt.Fprintf(&b, "line %d:\n  direct: %q\n  proxy:  %q\n", i+1, wl[i], gl[i])
		}
		return b.String()
	}
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	from := max(0, i-3)
	fmt.Fprintf(&b, "%d lines direct, %d through the proxy; first difference at line %d\ndirect:\n%s\nproxy:\n%s",
		len(wl), len(gl), i+1, strings.Join(wl[from:min(len(wl), i+4)], "\n"), strings.Join(gl[from:min(len(gl), i+4)], "\n"))
	return b.String()
}

func splitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q has no port", addr)
	}
	return addr[:i], addr[i+1:]
}
