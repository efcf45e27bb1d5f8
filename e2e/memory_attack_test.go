package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// rssOf is a process's resident set, in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestMemoryAttackStaysBounded: a user without any special privilege sends
// distinct long reads of a cached table (each a list of tens of thousands
// of literals, ~340 KB): every plan, learned result metadata and cached
// result they leave is bounded in bytes, so the proxy's resident memory
// stays within 64 MiB of where it was before, and the reads are answered
// as MariaDB answers them.
func TestMemoryAttackStaysBounded(t *testing.T) {
	memoryAttack(t, "")
}

// With every statement planned (max_planned_text above their length, each
// plan ~16 MB), the caches' byte bounds and memory_limit hold the proxy:
// its resident memory stays within the limit (and a little the runtime
// does not count).
func TestMemoryAttackPlansBoundedByBytes(t *testing.T) {
	memoryAttack(t, "max_planned_text: 1MB")
}

// memoryLimit is the memory_limit TestMemoryAttackPlansBoundedByBytes
// sets.
const memoryLimit = 192 << 20

func memoryAttack(t *testing.T, options string) {
	if proxyRaces() {
		t.Skip("the proxy is built with -race, whose shadow memory is what RSS would measure")
	}
	e := newCacheEnvOpts(t, options)
	// The default plugins that keep statements (the cache, the digests).
	e.proxy.stop(t)
	if options != "" {
		options = ", " + options
	}
	e.yaml = "plugins:\n  - name: cache\n    options: {max_table_size: 1MB" + options + "}\n  - name: digest\n"
	if options != "" {
		e.yaml = fmt.Sprintf("memory_limit: %d\n", memoryLimit) + e.yaml
	}
	e.start(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO `"+e.db+"`.t SELECT seq, CONCAT('n', seq) FROM mysql.seq_1_to_500")
	cacheTables(t, e, map[string]int64{"t": 500})
	db := e.open(t, e.app)
	db.SetMaxOpenConns(60)
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	pid := e.proxy.cmd.Process.Pid
	idle := rssOf(t, pid)
	n := 200
	if testing.Short() {
		n = 40
	}
	var list strings.Builder
	for i := 0; i < 60000; i++ {
		fmt.Fprintf(&list, "%d,", i)
	}
	start := time.Now()
	peak, quarter := idle, idle
	for i := 0; i < n; i++ {
		if i == n/4 {
			quarter = rssOf(t, pid)
		}
		// (Lists of distinct lengths: distinct shapes, each planned.)
		list.WriteString(strconv.Itoa(60000+i) + ",")
		q := fmt.Sprintf("SELECT id, name FROM t WHERE id IN (%s0) ORDER BY id", list.String())
		var rows int
		if err := db.QueryRow("SELECT COUNT(*) FROM (" + q + ") x").Scan(&rows); err != nil {
			t.Fatalf("statement %d: %v", i, err)
		}
		r, err := db.Query(q)
		if err != nil {
			t.Fatalf("statement %d: %v", i, err)
		}
		got := 0
		for r.Next() {
			got++
		}
		r.Close()
		if got != 500 || rows != 500 {
			t.Fatalf("statement %d: %d rows (in a derived table: %d), want 500", i, got, rows)
		}
		if rss := rssOf(t, pid); rss > peak {
			peak = rss
		}
	}
	attackPeak := peak
	// What stays once the statements have gone (the collector returns
	// their garbage to the system in the background, within seconds).
	time.Sleep(3 * time.Second)
	attackAfter := rssOf(t, pid)
	// Many sessions, each of which sent one such statement and stays
	// open: their buffers are let go once answered (what stays is in the
	// bounded caches: the result cache alone may hold 64 MB of answers to
	// such statements, keyed by their texts).
	var long []*sql.Conn
	for i := 0; i < 50; i++ {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var rows int
		q := fmt.Sprintf("SELECT COUNT(*) FROM t WHERE id IN (%s%d)", list.String(), 70000+i)
		if err := c.QueryRowContext(context.Background(), q).Scan(&rows); err != nil || rows != 500 {
			t.Fatalf("session %d: %d rows, %v", i, rows, err)
		}
		long = append(long, c)
		if rss := rssOf(t, pid); rss > peak {
			peak = rss
		}
	}
	end := rssOf(t, pid)
	t.Logf("%d statements of %d KB, then %d sessions of one each, in %s: proxy RSS idle %d MiB, after a quarter %d MiB, peak %d MiB (%d MiB before the sessions, %d MiB 3 s after them), after %d MiB",
		n, len(list.String())>>10, len(long), time.Since(start).Round(time.Millisecond), idle>>20, quarter>>20, peak>>20, attackPeak>>20, attackAfter>>20, end>>20)
	if options != "" {
		if peak > memoryLimit+32<<20 {
			t.Errorf("the proxy's resident memory peaked at %d MiB, over its memory_limit of %d MiB and 32 more", peak>>20, memoryLimit>>20)
		}
		return
	}
	if attackAfter-idle > 64<<20 || attackPeak-idle > 128<<20 {
		t.Errorf("the statements grew the proxy by %d MiB (%d MiB at the peak) over %d MiB idle, want at most 64 (128)", (attackAfter-idle)>>20, (attackPeak-idle)>>20, idle>>20)
	}
	if peak-idle > 128<<20 {
		t.Errorf("the sessions grew the proxy by %d MiB (peak %d MiB over %d MiB idle), want at most 128", (peak-idle)>>20, peak>>20, idle>>20)
	}
}

// TestPastMemoryLimitNewClientsAreRefused: what the proxy cannot shed (a
// cached table's copy) keeps its live heap past the high-water mark of
// memory_limit: new clients get 1041 (HY000), as from a backend out of
// memory, while the sessions there are go on; once the table is
// uncached, clients are taken again.
func TestPastMemoryLimitNewClientsAreRefused(t *testing.T) {
	if proxyRaces() {
		t.Skip("the proxy is built with -race, whose heap is not the one memory_limit is set for")
	}
	e := newCacheEnvUnstarted(t, "memory_limit: 64MB\nplugins:\n  - name: cache\n    options: {max_table_size: 64MB}\n")
	b := e.backend
	// About 58 MB in memory: past 80% of 64 MB.
	b.Exec(t, "CREATE TABLE `"+e.db+"`.big (id INT PRIMARY KEY, pad VARCHAR(1000))",
		"INSERT INTO `"+e.db+"`.big SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000) FROM mysql.seq_1_to_55000")
	e.start(t)
	ctx := context.Background()
	admin := e.open(t, e.admin)
	app := e.open(t, e.app)
	held, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	adminConn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer adminConn.Close()
	if _, err := adminConn.ExecContext(ctx, "ALTER TABLE big CACHE"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, admin, "big", 55000)
	dsn := testdb.DSN(e.proxy.addr, e.app.name, e.app.password, e.db, nil)
	var refused error
	waitFor(t, 15*time.Second, "a new client to be refused", func() (bool, error) {
		c, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		refused = c.Ping()
		return refused != nil, nil
	})
	var me *mysql.MySQLError
	if !errors.As(refused, &me) || me.Number != 1041 || string(me.SQLState[:]) != "HY000" {
		t.Fatalf("a new client got %v, want error 1041 (HY000)", refused)
	}
	t.Logf("a new client: %v", refused)
	var n int
	if err := held.QueryRowContext(ctx, "SELECT COUNT(*) FROM big WHERE id <= 10").Scan(&n); err != nil || n != 10 {
		t.Fatalf("a session that was there: %d, %v", n, err)
	}
	if !strings.Contains(e.proxy.stderr.String(), "new clients are refused (error 1041)") {
		t.Error("the proxy did not log that it refuses clients")
	}
	if _, err := held.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// Uncached through a session that was there (an admin's).
	if _, err := adminConn.ExecContext(ctx, "ALTER TABLE big NOCACHE"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "new clients to be taken again", func() (bool, error) {
		c, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.Ping()
		return err == nil, err
	})
}
