package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The proxy-wide memory budget (cache option max_total_size): CACHE of a
// table that would not fit is refused with error 1114, and a cached table
// that grows past what the budget leaves is not loaded (its reads go to
// the backend, cached_tables says why) but stays cached.
func TestCacheMemoryBudget(t *testing.T) {
	e := newCacheEnv(t)
	e.proxy.stop(t)
	e.yaml = "plugins:\n  - name: cache\n    options: {max_table_size: 1MB, max_total_size: 100KB}\n"
	e.start(t)
	use := "USE `" + e.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE small (id INT PRIMARY KEY, v INT)", use+"INSERT INTO small VALUES (1, 1)",
		use+"CREATE TABLE big (id INT PRIMARY KEY, b VARCHAR(500))",
		use+"INSERT INTO big SELECT seq, REPEAT('b', 400) FROM seq_1_to_1000",
		use+"ANALYZE TABLE big")
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE small CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "small", "ready", 1, 1)
	_, err := admin.Exec("ALTER TABLE big CACHE")
	wantError(t, err, 1114, "max_total_size")
	if _, _, _, found := cachedState(t, app, "big"); found {
		t.Fatal("a table refused for the budget is listed as cached")
	}

	// Grown past the budget while cached: not loaded here, still cached.
	if _, err := app.Exec("INSERT INTO small SELECT seq, seq FROM seq_2_to_3000"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "small over the budget", func() (bool, error) {
		var state, msg string
		err := app.QueryRow("SELECT state, error FROM tableproxy.cached_tables WHERE table_name = 'small'").Scan(&state, &msg)
		return err == nil && state == "failed" && strings.Contains(msg, "memory budget"), err
	})
	var n int
	if err := app.QueryRow("SELECT COUNT(*) FROM small").Scan(&n); err != nil || n != 3000 {
		t.Fatalf("rows %d, %v", n, err)
	}
	// Back under it: loaded again on the next write's bump.
	if _, err := app.Exec("DELETE FROM small WHERE id > 1"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "small", "ready", 1, 1)

	// Room freed by another table's NOCACHE: a table that did not fit is
	// loaded then, with no write of its own (it is not read again on a
	// timer meanwhile).
	e.backend.Exec(t, use+"CREATE TABLE other (id INT PRIMARY KEY, b VARCHAR(300))",
		use+"INSERT INTO other SELECT seq, REPEAT('o', 200) FROM seq_1_to_200")
	if _, err := admin.Exec("ALTER TABLE other CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "other", "ready", 200, -1)
	var otherBytes int64
	if err := app.QueryRow("SELECT memory_bytes FROM tableproxy.cached_tables WHERE table_name = 'other'").Scan(&otherBytes); err != nil {
		t.Fatal(err)
	}
	// small grows to fit alone, not beside other.
	if _, err := app.Exec("INSERT INTO small SELECT seq, seq FROM seq_2_to_1200"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "small over the budget beside other", func() (bool, error) {
		var state, msg string
		err := app.QueryRow("SELECT state, error FROM tableproxy.cached_tables WHERE table_name = 'small'").Scan(&state, &msg)
		return err == nil && state == "failed" && strings.Contains(msg, "memory budget"), fmt.Errorf("%s %s (other: %d bytes)", state, msg, otherBytes)
	})
	loads := strings.Count(e.proxy.stderr.String(), "does not fit in the memory budget")
	if _, err := admin.Exec("ALTER TABLE other NOCACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "small", "ready", 1200, -1)
	if n := strings.Count(e.proxy.stderr.String(), "does not fit in the memory budget"); n != loads {
		t.Errorf("%d more loads that did not fit while waiting for room", n-loads)
	}
}
