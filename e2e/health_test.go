package e2e

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// relay forwards TCP connections to a backend until it is closed, when
// it also cuts those it forwards: a backend that goes away.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startRelay(t *testing.T, to string) *relay {
	return startRelayAt(t, "127.0.0.1:0", to)
}

// startRelayAt is startRelay listening on addr (a relay closed before, to
// bring the backend back).
func startRelayAt(t *testing.T, addr, to string) *relay {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, b)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	}()
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// TestHealthEndpoints: /healthz says the process answers; /readyz says it
// serves as it should, per condition (the backend greets, the cluster is
// caught up, the binary log followed for the cached tables), and turns
// 503, naming the backend, when the backend is gone.
func TestHealthEndpoints(t *testing.T) {
	e := newCacheEnvOpts(t, "")
	e.proxy.stop(t)
	rl := startRelay(t, e.backend.Addr)
	metrics := freePort(t)
	e.proxy = startProxyOpts(t, rl.addr(), []account{e.app}, proxyOpts{yaml: "metrics_listen: " + metrics + "\n" + e.yaml,
		admins: []account{e.admin}, dataDir: e.dataDir})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY)", "INSERT INTO `"+e.db+"`.t VALUES (1)")
	cacheTables(t, e, map[string]int64{"t": 1})
	var body string
	waitFor(t, 10*time.Second, "/readyz to say ready", func() (bool, error) {
		var code int
		code, body = get("/readyz")
		return code == 200, nil
	})
	for _, want := range []string{"backend: ok", "cluster: ok", "binlog: ok"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz does not say %q:\n%s", want, body)
		}
	}
	rl.close()
	waitFor(t, 10*time.Second, "/readyz to say not ready", func() (bool, error) {
		var code int
		code, body = get("/readyz")
		return code == 503, nil
	})
	if !strings.Contains(body, "backend: not ready") {
		t.Errorf("/readyz without the backend:\n%s", body)
	}
	t.Logf("/readyz without the backend:\n%s", body)
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz without the backend: %d", code)
	}
}

// TestMetricsAreDocumented: every tableproxy_* metric a proxy with its
// default plugins and the firewall serves is in docs/operations.md, and
// every metric the document lists is one the code defines.
func TestMetricsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(tableproxy_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	e := newDefaultsEnv(t, true)
	metrics := freePort(t)
	// A cached table, so that the per-table series are served too.
	p := e.start(t, proxyOpts{defaults: true, flags: []string{"--metrics-listen", metrics},
		yaml: "plugins:\n  - name: metrics\n  - name: firewall\n    options: {rules: [{name: no-load, kinds: [load]}]}\n  - name: cache\n  - name: ddloffload\n  - name: digest\n"})
	admin := testdb.Open(t, testdb.DSN(p.addr, e.admin.name, e.admin.password, e.db, nil))
	if _, err := admin.Exec("ALTER TABLE ref CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "ref", "ready", 3, 0)
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `tableproxy_cache_table_state{state="ready",table="`+e.db+`.ref"} 1`) {
		t.Errorf("no per-table state for the cached table")
	}
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# HELP (tableproxy_[a-z0-9_]+) `).FindAllStringSubmatch(string(body), -1) {
		served[m[1]] = true
		if !documented[m[1]] {
			t.Errorf("%s is served but not in docs/operations.md", m[1])
		}
	}
	var code strings.Builder
	_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, _ := os.ReadFile(path)
			code.Write(b)
		}
		return nil
	})
	for name := range documented {
		if !strings.Contains(code.String(), `"`+name+`"`) && !strings.Contains(code.String(), name[len("tableproxy_"):]) {
			t.Errorf("%s is in docs/operations.md but no code defines it", name)
		}
	}
	t.Logf("%d metrics served, %d documented", len(served), len(documented))
}

// TestBackendOutageLogsStayReadable: a backend outage under 40 busy
// sessions does not flood the log: each warning is written at most once
// a second, saying how many like it were held back.
func TestBackendOutageLogsStayReadable(t *testing.T) {
	e := newCacheEnvOpts(t, "")
	e.proxy.stop(t)
	rl := startRelay(t, e.backend.Addr)
	e.proxy = startProxyOpts(t, rl.addr(), []account{e.app}, proxyOpts{yaml: e.yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	db := e.open(t, e.app)
	db.SetMaxOpenConns(40)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, _ = db.ExecContext(ctx, "SELECT 1")
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	before := strings.Count(e.proxy.stderr.String(), "level=WARN")
	addr := rl.addr()
	rl.close()
	time.Sleep(4 * time.Second)
	startRelayAt(t, addr, e.backend.Addr)
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	log := e.proxy.stderr.String()
	warns := strings.Count(log, "level=WARN") - before
	t.Logf("%d WARN lines for a 4 s outage under 40 sessions (%d say how many were held back)", warns, strings.Count(log, "repeated="))
	if warns > 40 {
		t.Errorf("%d WARN lines for a 4 s outage", warns)
	}
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}
