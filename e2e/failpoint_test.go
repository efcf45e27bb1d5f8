package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/failpoint"
	"tableproxy/internal/testdb"
)

// TestCacheFailureAtEachStageLeaksNothing: a panic at each stage of a
// cached read and of a cached write (failpoints of the real binary, armed
// by TABLEPROXY_FAILPOINTS) ends only its own session. After each, the
// cached table is answered from memory again at once, what a write did
// before the panic is what is read, by the proxy as by MariaDB, and the
// connection gauge is back to its value. (The test's name is in its
// database's, so it does not say panic, which the harness looks for.)
func TestCacheFailureAtEachStageLeaksNothing(t *testing.T) {
	metrics := freePort(t)
	e := newCacheEnvUnstarted(t, "metrics_listen: "+metrics+"\nplugins:\n  - name: metrics\n  - name: cache\n    options: {max_table_size: 1MB}\n")
	b := e.backend
	b.Exec(t, "CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+e.db+"`.t VALUES (1, 10), (2, 20)")
	stages := []struct {
		point string
		sql   string // %s: the failpoint's marker
		write bool
	}{
		{"cache.read.snapshot", "SELECT v %s FROM t WHERE id = 1", false},
		{"cache.read.answer", "SELECT v %s FROM t WHERE id = 1", false},
		{"cache.result", "SELECT v %s FROM t WHERE id = 2", false}, // the first: while its metadata is learned
		{"cache.write.intent", "UPDATE t SET v = v + 1 %s WHERE id = 1", true},
		{"cache.result", "UPDATE t SET v = v + 1 %s WHERE id = 2", true},
	}
	var points []string
	for _, s := range stages {
		points = append(points, s.point)
	}
	e.proxy = startProxyOpts(t, b.Addr, []account{e.app}, proxyOpts{yaml: e.yaml, admins: []account{e.admin}, dataDir: e.dataDir,
		env: []string{"TABLEPROXY_FAILPOINTS=" + strings.Join(points, ",")}})
	admin := cacheTables(t, e, map[string]int64{"t": 2})
	app := e.open(t, e.app)
	direct := testdb.Open(t, testdb.DSN(b.Addr, e.app.name, e.app.password, e.db, nil))
	ctx := context.Background()

	// Each stage's statement once without its failpoint's marker, through
	// a pooled connection: its shape is learned, so that a read is
	// answered from memory when the marked one comes.
	for _, s := range stages {
		if _, err := app.Exec(fmt.Sprintf(s.sql, "/* warm */")); err != nil {
			t.Fatal(err)
		}
	}
	// servedAgain waits (briefly) until t is answered from memory, each
	// row as MariaDB has it.
	servedAgain := func(t *testing.T, within time.Duration) {
		t.Helper()
		hits := memoryHits(t, admin, "t")
		waitFor(t, within, "t to be answered from memory", func() (bool, error) {
			for _, id := range []int{1, 2} {
				q := fmt.Sprintf("SELECT v FROM t WHERE id = %d", id)
				var got, want int
				if err := app.QueryRow(q).Scan(&got); err != nil {
					return false, err
				}
				if err := direct.QueryRow(q).Scan(&want); err != nil {
					return false, err
				}
				if got != want {
					t.Fatalf("%s: proxy %d, MariaDB %d", q, got, want)
				}
			}
			return memoryHits(t, admin, "t") >= hits+2, fmt.Errorf("hits %d, were %d", memoryHits(t, admin, "t"), hits)
		})
	}
	servedAgain(t, 10*time.Second) // (after the warming writes)
	active := func() float64 {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "tableproxy_connections_active "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("no tableproxy_connections_active in /metrics")
		return 0
	}
	for _, s := range stages {
		name := s.point
		if s.write {
			name += " (write)"
		}
		t.Run(name, func(t *testing.T) {
			gauge := active()
			panics := func() int {
				return strings.Count(e.proxy.stderr.String(), `panic="failpoint `+s.point+`"`)
			}
			before := panics()
			// The marked statement is a shape of its own: the first run of
			// a read learns its metadata from the backend's answer, and
			// only the second is answered from memory.
			for run := 1; run <= 2 && panics() == before; run++ {
				conn, err := app.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_, err = conn.ExecContext(ctx, fmt.Sprintf(s.sql, failpoint.Marker(s.point)))
				conn.Close()
				// (At cache.result the answer was sent before the panic.)
				t.Logf("run %d: %v", run, err)
				time.Sleep(100 * time.Millisecond) // (the log line)
			}
			if panics() == before {
				t.Fatal("the failpoint was not reached")
			}
			// The proxy is up, and the table is answered from memory at
			// once, its rows the backend's.
			servedAgain(t, 2*time.Second)
			if st, _ := cachedStatus(t, admin, "t"); st.state != "ready" {
				t.Errorf("after the panic: %+v, want ready", st)
			}
			waitFor(t, 2*time.Second, "the connection gauge to return to its value", func() (bool, error) {
				n := active()
				return n == gauge, fmt.Errorf("tableproxy_connections_active %v, was %v", n, gauge)
			})
		})
	}
}
