package e2e

import (
	"strings"
	"testing"
	"time"
)

// A cached table written all the time is not reloaded after every write:
// copies replaced before they answered a read back the loads off, and once
// the writes stop the table is back in memory within the backoff's bound.
func TestCacheReloadBacksOffUnderWrites(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO `"+e.db+"`.kv SELECT seq, 0 FROM mysql.seq_1_to_2000")
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, app, "kv", "ready", 2000, 1)

	loads := func() int { return strings.Count(e.proxy.stderr.String(), "cache: table loaded") }
	before := loads()
	writes := 0
	for start := time.Now(); time.Since(start) < 4*time.Second; {
		writes++
		if _, err := app.Exec("UPDATE kv SET v = ? WHERE id = 1", writes); err != nil {
			t.Fatal(err)
		}
		// Past the intents' linger (20 ms), so that each write has its own
		// and the loader finds the table servable between them.
		time.Sleep(50 * time.Millisecond)
	}
	during := loads() - before
	t.Logf("%d writes in 4 s, %d loads", writes, during)
	// Without the backoff the loader reloads after nearly every write; with
	// it, the waits double from one load's time up to 2 s: about ten.
	if during > 15 || during*3 > writes {
		t.Errorf("%d loads during %d writes: the reloads did not back off", during, writes)
	}

	// The writes stop: the table is back in memory, at the last write.
	var hits0 int64
	if err := admin.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&hits0); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitFor(t, 10*time.Second, "reads from memory after the writes stopped", func() (bool, error) {
		var v int
		if err := app.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != writes {
			t.Fatalf("read %d (%v), want %d", v, err, writes)
		}
		var hits int64
		err := admin.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&hits)
		return hits > hits0, err
	})
	t.Logf("served from memory again %s after the last write", time.Since(stopped).Round(time.Millisecond))
}
