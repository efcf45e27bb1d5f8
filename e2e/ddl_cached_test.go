package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// TestDDLOnCachedTable: ADD INDEX and CREATE INDEX on a cached table run
// (as a job, or natively) whichever of the two plugins comes first on the
// chain, and the table stays cached at its version; any other DDL on it
// runs too, and the copy is loaded again with the new definition.
func TestDDLOnCachedTable(t *testing.T) {
	for _, order := range [][2]string{{"cache", "ddloffload"}, {"ddloffload", "cache"}} {
		t.Run(order[0]+"-first", func(t *testing.T) {
			e := newDDLEnv(t)
			e.proxy.stop(t)
			e.seed(t, 500)
			yaml := fmt.Sprintf("plugins:\n  - name: %s\n  - name: %s\n", order[0], order[1])
			yaml = strings.Replace(yaml, "name: ddloffload\n", fmt.Sprintf("name: ddloffload\n    options: {strategy: backfill, old_table_retention: 0, binlog_user: %s}\n", e.admin.name), 1)
			e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: yaml, admins: []account{e.admin}, dataDir: e.dataDir})
			admin := e.open(t, e.admin)
			if _, err := admin.Exec("ALTER TABLE t CACHE"); err != nil {
				t.Fatal(err)
			}
			v := waitState(t, admin, "t", "ready", 500, 1)
			for _, ddl := range []string{"ALTER TABLE t ADD INDEX ic (c)", "CREATE UNIQUE INDEX uu ON t (u)"} {
				if _, err := admin.Exec(ddl); err != nil {
					t.Fatalf("%s: %v", ddl, err)
				}
			}
			ddl := showCreate(t, e.direct(t), "t")
			if !strings.Contains(ddl, "KEY `ic` (`c`)") || !strings.Contains(ddl, "UNIQUE KEY `uu` (`u`)") {
				t.Errorf("indexes missing:\n%s", ddl)
			}
			if st, _ := cachedStatus(t, admin, "t"); st.state != "ready" || st.version != v {
				t.Errorf("after the indexes: %+v, want ready at version %d (no row changed)", st, v)
			}
			// DDL that changes more than indexes runs too, and the copy is
			// loaded again with the new definition.
			for _, ddl := range []string{"ALTER TABLE t ADD COLUMN x INT", "ALTER TABLE t ADD INDEX ix (pad), ADD COLUMN y INT",
				"ALTER IGNORE TABLE t ADD UNIQUE INDEX ip (pad)", "ALTER TABLE t DROP INDEX ic"} {
				if _, err := admin.Exec(ddl); err != nil {
					t.Fatalf("%s: %v", ddl, err)
				}
				v = waitState(t, admin, "t", "ready", 500, v+1)
			}
			var cols int
			if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't' AND COLUMN_NAME IN ('x', 'y')").Scan(&cols); err != nil || cols != 2 {
				t.Fatalf("columns x, y: %d (%v)", cols, err)
			}
			var x, y sql.NullInt64
			if err := admin.QueryRow("SELECT x, y FROM t WHERE id = 1").Scan(&x, &y); err != nil || x.Valid || y.Valid {
				t.Errorf("the new columns read through the proxy: %v %v (%v), want NULL NULL", x, y, err)
			}
		})
	}
}

// TestDDLCachedTableServedThroughout: an online ADD INDEX on a cached table
// while a reader reads it through the proxy and compares every answer with
// the backend's, and a writer writes it through the proxy during the copy
// (each write invalidates and reloads the copy, as usual) and reads its own
// writes back. Once the writes stop, every read until after the job has
// ended is answered from memory: the swap does not invalidate the copy,
// and the table's version never moves back.
func TestDDLCachedTableServedThroughout(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	const rows = 30000
	e.seed(t, rows)
	// The job waits 4 s in its verify stage (after the catch-up): time for
	// the copy to settle after the last write, before the swap.
	p := e.launchWith(t, "  - name: cache\n"+e.ddlOptions(", chunk_rows: 1000"), "verify:4s")
	e.proxy = p
	admin, app, direct := e.open(t, e.admin), e.open(t, e.app), e.direct(t)
	// mark, cached too, is the barrier that says the binary-log follower
	// has read past the last write (see below).
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.mark (id INT PRIMARY KEY, n INT)", "INSERT INTO `"+e.db+"`.mark VALUES (1, 0)")
	for _, table := range []string{"t", "mark"} {
		if _, err := admin.Exec("ALTER TABLE " + table + " CACHE"); err != nil {
			t.Fatal(err)
		}
	}
	v0 := waitState(t, admin, "t", "ready", rows, 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type read struct {
		at     time.Time
		memory bool
		why    string // the proxy's reason, for a read sent to the backend
	}
	var (
		mu        sync.Mutex
		reads     []read
		mismatch  []string
		readerErr error
		quietFrom atomic.Int64 // unix nanos after which no write is made
	)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the reader: rows nobody writes, by id lists and ranges
		defer wg.Done()
		conn, err := app.Conn(ctx)
		if err != nil {
			readerErr = err
			return
		}
		defer conn.Close()
		for ctx.Err() == nil {
			a, b, c := 1+rand.IntN(rows), 1+rand.IntN(rows), 1+rand.IntN(rows-20)
			for _, q := range []string{
				fmt.Sprintf("SELECT id, k, c, pad, u FROM t WHERE id IN (%d, %d)", a, b),
				fmt.Sprintf("SELECT id, k, c FROM t WHERE id BETWEEN %d AND %d ORDER BY c", c, c+20),
			} {
				got, err := queryDump(ctx, conn, q)
				if err != nil {
					if ctx.Err() == nil {
						readerErr = fmt.Errorf("%s: %w", q, err)
					}
					return
				}
				var from, why string
				if err := conn.QueryRowContext(ctx, "SELECT served_from, reason FROM tableproxy.last_statement").Scan(&from, &why); err != nil {
					if ctx.Err() == nil {
						readerErr = err
					}
					return
				}
				want, err := queryDump(ctx, direct, q)
				if err != nil {
					if ctx.Err() == nil {
						readerErr = err
					}
					return
				}
				if ctx.Err() != nil {
					return // (an answer cut short by the end of the test)
				}
				mu.Lock()
				reads = append(reads, read{time.Now(), from == "proxy", why})
				if got != want {
					mismatch = append(mismatch, fmt.Sprintf("%s (%s): proxy %s, backend %s", q, from, got, want))
				}
				mu.Unlock()
			}
		}
	}()
	var writes atomic.Int64
	writerErr := make(chan error, 1)
	go func() { // the writer: rows above the seeded ones, read back at once
		defer wg.Done()
		conn, err := app.Conn(ctx)
		if err != nil {
			writerErr <- err
			return
		}
		defer conn.Close()
		for id := rows + 1; quietFrom.Load() == 0 && ctx.Err() == nil; id++ {
			for _, w := range []string{
				fmt.Sprintf("INSERT INTO t (id, k, c, pad, u) VALUES (%d, 1, 'new', 'p', NULL)", id),
				fmt.Sprintf("UPDATE t SET c = 'updated-%d' WHERE id = %d", id, id),
			} {
				if _, err := conn.ExecContext(ctx, w); err != nil {
					writerErr <- err
					return
				}
				writes.Add(1)
				q := fmt.Sprintf("SELECT id, c FROM t WHERE id = %d", id)
				got, err := queryDump(ctx, conn, q)
				if err != nil {
					writerErr <- err
					return
				}
				if want, _ := queryDump(ctx, direct, q); got != want {
					writerErr <- fmt.Errorf("after %s: proxy %s, backend %s", w, got, want)
					return
				}
			}
			if id%3 == 0 {
				if _, err := conn.ExecContext(ctx, fmt.Sprintf("DELETE FROM t WHERE id = %d", id-1)); err != nil {
					writerErr <- err
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		writerErr <- nil
	}()

	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitJob(t, admin, 60*time.Second, "the job to reach verify", func(j ddlJob) bool { return j.Stage == "verify" })
	quietFrom.Store(time.Now().UnixNano())
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	// The last write's reload. Its row events may reach the binary-log
	// follower after its intent closed (a loaded host): each is a bump of
	// its own. A write of mark directly on the backend, after the last
	// write of t, is seen by the follower after every event of t's writes
	// (the log is read in order): once mark's version has moved, t's has
	// had all its bumps, and it counts as settled once it has held for a
	// second after that.
	_, _, vMark, _ := cachedState(t, admin, "mark")
	e.backend.Exec(t, "UPDATE `"+e.db+"`.mark SET n = n + 1")
	waitFor(t, 30*time.Second, "the follower to read past the last write", func() (bool, error) {
		_, _, v, _ := cachedState(t, admin, "mark")
		return v > vMark, fmt.Errorf("mark at version %d", v)
	})
	var vQuiet int64
	var since time.Time
	waitFor(t, 15*time.Second, "the copy to be loaded after the last write", func() (bool, error) {
		st, _ := cachedStatus(t, admin, "t")
		if st.state != "ready" || st.version <= v0 || st.version != vQuiet {
			vQuiet, since = st.version, time.Now()
			return false, fmt.Errorf("%+v", st)
		}
		return time.Since(since) >= time.Second, fmt.Errorf("%+v, held for %v", st, time.Since(since))
	})
	settled := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the job did not end")
	}
	ended := time.Now()
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	if readerErr != nil {
		t.Fatalf("reader: %v", readerErr)
	}
	if len(mismatch) > 0 {
		t.Fatalf("%d answers differ from the backend's, first: %s", len(mismatch), mismatch[0])
	}
	var quiet, quietMem, total, mem int
	var firstBackend, lastBackend time.Time // the quiet window's reads sent to the backend
	whys := map[string]int{}
	for _, r := range reads {
		total++
		if r.memory {
			mem++
		}
		if r.at.After(settled) {
			quiet++
			if r.memory {
				quietMem++
				continue
			}
			whys[r.why]++
			if firstBackend.IsZero() {
				firstBackend = r.at
			}
			lastBackend = r.at
		}
	}
	t.Logf("%d writes during the copy; %d reads compared, %d from memory; after the writes stopped: %d reads, %d from memory (the job ended %v after)",
		writes.Load(), total, mem, quiet, quietMem, ended.Sub(settled).Round(time.Millisecond))
	// After the writes stopped, the swap keeps the copy: reads stay in
	// memory. A read may still meet a lease renewal or a binary-log
	// heartbeat that came late on a loaded host: a moment's pass-through,
	// whatever the job does. So the reads sent to the backend must be
	// under 1%, or all fall within one stretch under 250 ms (half the
	// lease's renewal period); a cut-over that held the table longer,
	// or a copy dropped and reloaded by the swap (also seen in the version,
	// checked below), fails it.
	stall := lastBackend.Sub(firstBackend)
	if quiet-quietMem > 0 {
		t.Logf("after the writes stopped, %d reads went to the backend within %v: %v", quiet-quietMem, stall.Round(time.Millisecond), whys)
	}
	if quiet < 20 || (quietMem*100 < quiet*99 && stall > 250*time.Millisecond) {
		t.Errorf("after the writes stopped, %d of %d reads were answered from memory, the others within %v; want at least 99%% (and at least 20 reads), or the others within 250ms", quietMem, quiet, stall.Round(time.Millisecond))
	}
	if st, _ := cachedStatus(t, admin, "t"); st.state != "ready" || st.version != vQuiet {
		t.Errorf("after the swap: %+v, want ready at version %d (the copy kept)", st, vQuiet)
	}
	if !strings.Contains(p.stderr.String(), "the cached copy stays") {
		t.Error("the proxy did not log that the swap kept the copy")
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
	// The whole table through the proxy, from memory, equals the backend's.
	whole := "SELECT id, k, c, pad, u FROM t"
	if got, want := dumpQuery(t, app, whole), dumpQuery(t, direct, whole); got != want {
		t.Error("the whole table through the proxy differs from the backend's")
	}
}

// queryDump is q's answer (column metadata and raw values) as one string.
func queryDump(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string) (string, error) {
	rs, err := db.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	return dumpRows(rs), nil
}

// TestDDLCachedTableSwapOnFollower: in a cluster of two proxies, an ADD
// INDEX on a cached table sent to the follower. The job runs there, but
// the binary-log watcher that would invalidate the table for the job's
// RENAME runs on the leader: the follower's announcement of the swap
// reaches it (cluster.Node.AnnounceSwap), so the table's copy stays,
// ready, at the same version on both proxies, its reads answered from
// memory right after the job. Without the announcement the leader takes
// the RENAME for any other and the version moves.
func TestDDLCachedTableSwapOnFollower(t *testing.T) {
	e := buildClusterEnv(t, 2, nil, "  - name: ddloffload\n    options: {strategy: backfill, workers: 2, old_table_retention: 0}\n", "")
	const rows = 3000
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable,
		fmt.Sprintf("INSERT INTO `%s`.t (id, k, c, pad, u) SELECT seq, seq %% 100, CONCAT('row-', seq), MD5(seq), seq FROM mysql.seq_1_to_%d", e.db, rows),
		"CREATE TABLE `"+e.db+"`.marker (id INT PRIMARY KEY)")
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.db, nil))
	var leader *clusterNode
	waitFor(t, 20*time.Second, "a leader", func() (bool, error) {
		leader = e.leader(t, e.nodes[0])
		return leader != nil, nil
	})
	follower := e.nodes[0]
	if follower == leader {
		follower = e.nodes[1]
	}
	lead, fol := e.conn(t, leader, e.admin), e.conn(t, follower, e.admin)
	for _, q := range []string{"ALTER TABLE t CACHE", "ALTER TABLE marker CACHE"} {
		if _, err := lead.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	e.waitReadyEverywhere(t, "t", rows)
	m0 := waitState(t, lead, "marker", "ready", 0, 1)
	_, _, v0, _ := cachedState(t, lead, "t")
	_, _, f0, _ := cachedState(t, fol, "t")

	if _, err := e.conn(t, follower, e.app).Exec("ALTER TABLE t ADD INDEX idx_c (c)"); err != nil {
		t.Fatalf("ALTER on the follower: %v", err)
	}
	if j := waitJob(t, fol, 10*time.Second, "the job's row", func(j ddlJob) bool { return j.State != "running" }); j.State != "done" {
		t.Fatalf("the job on the follower: %+v", j)
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Fatalf("no index:\n%s", ddl)
	}
	// The leader's watcher has passed the job's RENAME once it has seen a
	// write made after it: one to another cached table, around the proxy.
	mustExec(t, direct, "INSERT INTO marker VALUES (1)")
	waitFor(t, 10*time.Second, "the leader's watcher to pass the swap", func() (bool, error) {
		st, _ := cachedStatus(t, lead, "marker")
		return st.version > m0 && st.state == "ready", fmt.Errorf("%+v", st)
	})
	st, _ := cachedStatus(t, lead, "t")
	fst, _ := cachedStatus(t, fol, "t")
	if st.state != "ready" || st.version != v0 || fst.state != "ready" || fst.version != f0 {
		t.Errorf("after the swap: leader %+v (version before %d), follower %+v (before %d); want both ready at the same version", st, v0, fst, f0)
	}
	for _, nd := range []*clusterNode{leader, follower} {
		c := e.conn(t, nd, e.app)
		var from string
		conn, err := c.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // (a statement's first run learns its columns from the backend)
			if _, err := queryDump(context.Background(), conn, "SELECT id, c FROM t WHERE id IN (1, 2999)"); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.QueryRowContext(context.Background(), "SELECT served_from FROM tableproxy.last_statement").Scan(&from); err != nil || from != "proxy" {
			t.Errorf("%s: a read after the swap was served from %q (%v), want proxy", nd.id, from, err)
		}
		conn.Close()
	}
}
