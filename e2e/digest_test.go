package e2e

import (
	"database/sql"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// digestRow reads one digest's figures from tableproxy.query_digests, by
// its normalized text.
type digestRow struct {
	count, sum, min, max, p99, rowsSent, affected, errors int64
	memory, results, backend                              int64
	node, pass                                            string
}

func readDigest(t *testing.T, db *sql.DB, text string) (digestRow, bool) {
	t.Helper()
	var r digestRow
	err := db.QueryRow(`SELECT count, sum_latency_us, min_latency_us, max_latency_us, p99_latency_us, rows_sent,
		rows_affected, errors, memory_count, result_cache_count, backend_count, node_id, top_pass_reason
		FROM tableproxy.query_digests WHERE digest_text = ?`, text).Scan(&r.count, &r.sum, &r.min, &r.max, &r.p99,
		&r.rowsSent, &r.affected, &r.errors, &r.memory, &r.results, &r.backend, &r.node, &r.pass)
	if err == sql.ErrNoRows {
		return r, false
	}
	if err != nil {
		t.Fatalf("query_digests for %q: %v", text, err)
	}
	return r, true
}

func execAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestQueryDigests: a known workload through a proxy started with its
// defaults comes out in tableproxy.query_digests with its counts, rows,
// errors and latencies, and where each was answered; ADMIN RESET QUERY
// DIGESTS is for admins and empties it.
func TestQueryDigests(t *testing.T) {
	e := newDefaultsEnv(t, true)
	p := e.start(t, proxyOpts{defaults: true})
	app, admin := e.open(t, p, e.app), e.open(t, p, e.admin)
	execAll(t, admin, "ADMIN RESET QUERY DIGESTS")

	for i := 0; i < 50; i++ {
		execAll(t, app, fmt.Sprintf("SELECT name FROM ref WHERE id = %d", i%3+1))
	}
	for i := 1; i <= 20; i++ {
		execAll(t, app, fmt.Sprintf("UPDATE t SET a = a + 1 WHERE id IN (%d, %d)", i, i+1000))
	}
	for i := 0; i < 5; i++ {
		if _, err := app.Exec("SELECT nosuch FROM ref"); mysqlErrNumber(err) != 1054 {
			t.Fatalf("SELECT nosuch: %v, want 1054", err)
		}
	}
	for i := 0; i < 3; i++ {
		execAll(t, app, "SELECT SLEEP(0.05)")
	}
	// Prepared executions share the text statements' digest.
	for i := 0; i < 10; i++ {
		var name string
		if err := app.QueryRow("SELECT name FROM ref WHERE id = ?", i%3+1).Scan(&name); err != nil {
			t.Fatal(err)
		}
	}

	const read = "select `name` from `ref` where `id` = ?"
	r, ok := readDigest(t, app, read)
	if !ok || r.count != 60 || r.rowsSent != 60 || r.backend != 60 || r.memory != 0 || r.errors != 0 ||
		r.pass != "nothing_cached" || r.node == "" {
		t.Errorf("point selects of ref: %+v (found %v), want 60 counted, 60 rows, all by the backend for nothing_cached", r, ok)
	}
	if r.min <= 0 || r.min > r.max || r.p99 < r.min || r.p99 > r.max || r.sum < 60*r.min || r.sum > 60*r.max {
		t.Errorf("point selects of ref: latencies inconsistent: %+v", r)
	}
	w, _ := readDigest(t, app, "update `t` set `a` = `a` + ? where `id` in ( ... )")
	if w.count != 20 || w.affected != 40 || w.pass != "not_select" {
		t.Errorf("updates of t: %+v, want 20 counted, 40 rows affected, not_select", w)
	}
	if bad, _ := readDigest(t, app, "select `nosuch` from `ref`"); bad.count != 5 || bad.errors != 5 {
		t.Errorf("failing selects: %+v, want 5 counted, 5 errors", bad)
	}
	// The latencies are the proxy's: each SLEEP(0.05) took 50 ms or more.
	s, _ := readDigest(t, app, "select `sleep` ( ? )")
	if s.count != 3 || s.min < 50000 || s.p99 < 50000 || s.max < s.p99 || s.max > 2000000 || s.sum < 150000 {
		t.Errorf("SLEEP(0.05): %+v, want 3 counted, each at least 50000 us", s)
	}

	// Once ref is cached, its reads are counted as answered from memory.
	execAll(t, admin, "ALTER TABLE ref CACHE")
	waitState(t, admin, "ref", "ready", 3, 0)
	for i := 0; i < 50; i++ {
		execAll(t, app, fmt.Sprintf("SELECT name FROM ref WHERE id = %d", i%3+1))
	}
	r2, _ := readDigest(t, app, read)
	if r2.count != 110 || r2.memory < 48 || r2.backend+r2.memory+r2.results != 110 {
		t.Errorf("point selects of ref once cached: %+v, want 110 counted, at least 48 from memory", r2)
	}

	// Reset: admins only.
	if _, err := app.Exec("ADMIN RESET QUERY DIGESTS"); mysqlErrNumber(err) != 1227 {
		t.Errorf("ADMIN RESET QUERY DIGESTS as a user: %v, want 1227", err)
	}
	execAll(t, admin, "ADMIN RESET QUERY DIGESTS")
	if _, ok := readDigest(t, app, read); ok {
		t.Errorf("the digest of ref's reads is still there after ADMIN RESET QUERY DIGESTS")
	}

	// EXPLAIN CACHE: admins only, and bad input.
	wantQueryError(t, app, 1227, "admin privilege", "EXPLAIN CACHE ref")
	wantQueryError(t, admin, 1064, "EXPLAIN CACHE takes one table name", "EXPLAIN CACHE")
	wantQueryError(t, admin, 1146, "doesn't exist", "EXPLAIN CACHE nosuch")
	wantQueryError(t, admin, 1064, "EXPLAIN CACHE takes one table name", "EXPLAIN CACHE a b")
}

// candidateRow is one table's row of tableproxy.cache_candidates.
type candidateRow struct {
	share           float64
	reads, bypass   float64
	verdict, reason string
}

func readCandidate(t *testing.T, db *sql.DB, table string) candidateRow {
	t.Helper()
	var c candidateRow
	var share, reads, bypass string
	err := db.QueryRow(`SELECT covered_share, reads_per_sec, bypass_writes_per_sec, verdict, reason
		FROM tableproxy.cache_candidates WHERE table_name = ?`, table).Scan(&share, &reads, &bypass, &c.verdict, &c.reason)
	if err != nil {
		t.Fatalf("cache_candidates for %s: %v", table, err)
	}
	c.share, _ = strconv.ParseFloat(share, 64)
	c.reads, _ = strconv.ParseFloat(reads, 64)
	c.bypass, _ = strconv.ParseFloat(bypass, 64)
	return c
}

// TestCacheAdvisor: after a workload, tableproxy.cache_candidates
// recommends a small read-mostly table, and not a write-heavy one, a big
// one, or one read only with shapes the evaluator does not cover, each
// with its reason; EXPLAIN CACHE lists the digests that would and would
// not be served. Caching the recommended table answers from memory the
// share of its reads the advisor predicted, within 5 points.
func TestCacheAdvisor(t *testing.T) {
	e := newDefaultsEnv(t, true)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.hot (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO `"+e.db+"`.hot SELECT seq, 0 FROM mysql.seq_1_to_20",
		"CREATE TABLE `"+e.db+"`.big (id INT PRIMARY KEY, pad VARCHAR(250) NOT NULL)",
		"INSERT INTO `"+e.db+"`.big SELECT seq, REPEAT('x', 240) FROM mysql.seq_1_to_3000",
		"CREATE TABLE `"+e.db+"`.unc (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
		"INSERT INTO `"+e.db+"`.unc SELECT seq, CONCAT('n', seq) FROM mysql.seq_1_to_20",
		"ANALYZE TABLE `"+e.db+"`.big")
	p := e.start(t, proxyOpts{yaml: "plugins:\n  - name: cache\n    options: {max_table_size: 256KB}\n  - name: digest\n"})
	app, admin := e.open(t, p, e.app), e.open(t, p, e.admin)
	execAll(t, admin, "ADMIN RESET QUERY DIGESTS")

	// ref: 70% of its reads point selects the evaluator answers, 30% a
	// function it does not compute.
	workload := func() {
		for i := 0; i < 200; i++ {
			q := fmt.Sprintf("SELECT name FROM ref WHERE id = %d", i%3+1)
			if i%10 >= 7 {
				q = fmt.Sprintf("SELECT UPPER(name) FROM ref WHERE id = %d", i%3+1)
			}
			execAll(t, app, q)
		}
	}
	workload()
	for i := 1; i <= 40; i++ {
		execAll(t, app, fmt.Sprintf("SELECT v FROM hot WHERE id = %d", i%20+1),
			fmt.Sprintf("UPDATE hot SET v = v + 1 WHERE id = %d", i%20+1))
		execAll(t, app, fmt.Sprintf("SELECT pad FROM big WHERE id = %d", i))
		execAll(t, app, fmt.Sprintf("SELECT UPPER(name) FROM unc WHERE id = %d", i%20+1))
	}
	// Prepared reads are planned as the prepared text.
	for i := 1; i <= 10; i++ {
		var pad string
		if err := app.QueryRow("SELECT pad FROM big WHERE id = ? AND pad <> ''", i).Scan(&pad); err != nil {
			t.Fatal(err)
		}
	}
	// Writes that bypass the proxy, seen in the binary log.
	for i := 1; i <= 10; i++ {
		e.backend.Exec(t, fmt.Sprintf("UPDATE `%s`.hot SET v = v + 1 WHERE id = %d", e.db, i))
	}
	waitFor(t, 10*time.Second, "bypassing writes of hot in the advisor", func() (bool, error) {
		return readCandidate(t, app, "hot").bypass > 0, nil
	})

	ref := readCandidate(t, app, "ref")
	if ref.verdict != "cache" || math.Abs(ref.share-70) > 0.5 || ref.reads <= 0 {
		t.Errorf("ref: %+v, want cache with 70%% covered", ref)
	}
	if c := readCandidate(t, app, "hot"); c.verdict != "too many writes" {
		t.Errorf("hot: %+v, want too many writes", c)
	}
	if c := readCandidate(t, app, "big"); c.verdict != "too large" || c.share != 100 {
		t.Errorf("big: %+v, want too large (its reads covered)", c)
	}
	if c := readCandidate(t, app, "unc"); c.verdict != "reads not covered" || c.share != 0 ||
		!strings.Contains(c.reason, "unsupported_expression") {
		t.Errorf("unc: %+v, want reads not covered for unsupported_expression", c)
	}
	sets, err := tryQuery(admin, "EXPLAIN CACHE ref")
	if err != nil || len(sets) != 1 {
		t.Fatalf("EXPLAIN CACHE ref: %v", err)
	}
	explained := strings.Join(textRows(sets[0]), "\n")
	for _, want := range []string{"verdict|cache|", "covered_share|70.0|",
		"served|select `name` from `ref` where `id` = ?|140 reads",
		"not served|select `upper` ( `name` ) from `ref` where `id` = ?|60 reads: unsupported_expression"} {
		if !strings.Contains(explained, want) {
			t.Errorf("EXPLAIN CACHE ref lacks %q:\n%s", want, explained)
		}
	}

	// Cache what it recommends, and run the same workload again.
	execAll(t, admin, "ALTER TABLE ref CACHE")
	waitState(t, admin, "ref", "ready", 3, 0)
	execAll(t, admin, "ADMIN RESET QUERY DIGESTS")
	workload()
	var memory, count int64
	if err := app.QueryRow("SELECT SUM(memory_count), SUM(count) FROM tableproxy.query_digests WHERE digest_text LIKE '%from `ref`%'").
		Scan(&memory, &count); err != nil {
		t.Fatal(err)
	}
	measured := float64(memory) * 100 / float64(count)
	t.Logf("ref: predicted %.1f%% of reads from memory, measured %.1f%% (%d of %d)", ref.share, measured, memory, count)
	if count != 200 || math.Abs(measured-ref.share) > 5 {
		t.Errorf("ref once cached: %d of %d reads from memory (%.1f%%), predicted %.1f%%", memory, count, measured, ref.share)
	}
	if c := readCandidate(t, app, "ref"); c.verdict != "already cached" {
		t.Errorf("ref once cached: %+v, want already cached", c)
	}
}

// TestQueryDigestsPerProxy: in a cluster each proxy counts the statements
// it sees, under its own node id, and resets only its own digests.
func TestQueryDigestsPerProxy(t *testing.T) {
	e := newClusterEnv(t, 2)
	// The cluster's nodes run the cache alone: add the digests.
	for _, nd := range e.nodes {
		nd.p.stop(t)
	}
	for _, nd := range e.nodes {
		cfg, err := os.ReadFile(nd.cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg = []byte(strings.Replace(string(cfg), "plugins:\n", "plugins:\n  - name: digest\n", 1))
		if err := os.WriteFile(nd.cfg, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		e.startNode(t, nd)
	}
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.r (id INT PRIMARY KEY)", "INSERT INTO `"+e.db+"`.r VALUES (1)")
	for i, nd := range e.nodes {
		app := e.conn(t, nd, e.app)
		for j := 0; j < 5+i; j++ { // n1 sees 5, n2 6
			execAll(t, app, fmt.Sprintf("SELECT id FROM r WHERE id = %d", j))
		}
	}
	const text = "select `id` from `r` where `id` = ?"
	for i, nd := range e.nodes {
		var node string
		var count int64
		app := e.conn(t, nd, e.app)
		if err := app.QueryRow("SELECT node_id, count FROM tableproxy.query_digests WHERE digest_text = ?", text).Scan(&node, &count); err != nil ||
			node != nd.id || count != int64(5+i) {
			t.Errorf("%s: node_id %q, count %d (%v), want %s and %d", nd.id, node, count, err, nd.id, 5+i)
		}
	}
	execAll(t, e.conn(t, e.nodes[0], e.admin), "ADMIN RESET QUERY DIGESTS")
	if _, ok := readDigest(t, e.conn(t, e.nodes[0], e.app), text); ok {
		t.Errorf("n1 still has the digest after its reset")
	}
	if r, ok := readDigest(t, e.conn(t, e.nodes[1], e.app), text); !ok || r.count != 6 {
		t.Errorf("n2 after n1's reset: %+v (found %v), want its 6", r, ok)
	}
}
