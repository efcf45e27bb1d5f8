package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCClient runs cclient/cclient.c, a libmariadb program that sends the
// commands Go drivers never send (COM_CHANGE_USER, COM_RESET_CONNECTION,
// COM_FIELD_LIST, COM_STATISTICS, COM_PING, COM_INIT_DB,
// COM_STMT_SEND_LONG_DATA, COM_STMT_FETCH, COM_STMT_RESET, COM_SET_OPTION,
// COM_PROCESS_KILL), directly and through the proxy, and requires the same
// output.
func TestCClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	bin := buildCClient(t)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		e.backend.Exec(t, "GRANT SELECT ON `e2e\\_missing\\_%`.* TO '"+e.users[0].name+"'@'"+host+"'")
	}
	var outs [2]string
	for i, ep := range e.endpoints() {
		// Each run starts from an empty database of the same name.
		e.backend.Exec(t, "DROP DATABASE `"+e.db+"`", "CREATE DATABASE `"+e.db+"`")
		host, port := splitAddr(t, ep.addr)
		cmd := exec.Command(bin, host, port, e.users[0].name, e.users[0].password, e.db, e.users[1].name, e.users[1].password)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: cclient: %v\nstdout:\n%s\nstderr:\n%s", ep.name, err, stdout.String(), stderr.String())
			}
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s: cclient still running after 90s\nstdout:\n%s\nstderr:\n%s", ep.name, stdout.String(), stderr.String())
		}
		outs[i] = stdout.String()
	}
	direct, proxied := outs[0], outs[1]
	// Lines the backend's run must contain, so that a run that went wrong
	// the same way twice cannot pass.
	for _, want := range []string{
		"stat: non-empty=1 starts-with-Uptime=1",
		"select e2e_no_such_db: error 1044 (42000)",
		"select e2e_missing_db: error 1049 (42000) Unknown database 'e2e_missing_db'",
		"change to user2: ok",
		"change to user1 without db: ok",
		"reset: 0",
		"  field flag org=flag table=lf org_table=lf",
		"  row: '1' '900000' '849e38f1e6d055704e60e1cd6535e4f5' 'héllo wörld 😀'",
		"  row: '2' '4' '4d8b6084f3d167b76cac66a22a91be02' 'second'",
		"execute id > 10: cursor open=1\n  fetched 90 rows: first=11 last=100 sum=4995",
		"execute id > 97: cursor open=1\n  fetched 3 rows: first=98 last=100 sum=297",
		"  row: 'x' NULL\n  ok: affected=0 insert_id=0 warnings=0\n  columns: s",
		"victim after kill: connection lost",
		"kill unknown id: error 1094 (HY000) Unknown thread id: 1073741823",
		"\ndone\n",
	} {
		if !strings.Contains(direct, want) {
			t.Errorf("direct output lacks %q\noutput:\n%s", want, direct)
		}
	}
	if d := firstDiff(direct, proxied); d != "" {
		t.Errorf("cclient output differs (direct vs proxy):\n%s", d)
	}
}

// buildCClient compiles cclient.c against libmariadb into a temporary
// directory.
func buildCClient(t *testing.T) string { return buildC(t, "cclient/cclient.c") }

// buildC compiles one C source file (relative to e2e/) against libmariadb
// into a temporary directory.
func buildC(t *testing.T, src string) string {
	t.Helper()
	gcc := requireTool(t, "gcc", "gcc")
	flags, err := exec.Command("mariadb_config", "--cflags", "--libs").Output()
	if err != nil {
		flags, err = exec.Command("pkg-config", "--cflags", "--libs", "libmariadb").Output()
	}
	if err != nil {
		msg := "libmariadb development files not found (install the Debian packages libmariadb-dev and pkg-config)"
		if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-O1", "-Wall", "-Wextra", "-Werror", "-o", bin, src}, strings.Fields(string(flags))...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}
