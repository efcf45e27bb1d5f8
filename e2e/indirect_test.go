package e2e

import (
	"testing"
)

// TestWritesThroughViewsAndTriggers: a write through the proxy that
// reaches a cached table through a view, or through another table's
// trigger, is seen by the next read through the proxy, as any write
// through it is (the statement names neither the cached table nor what
// changes it).
func TestWritesThroughViewsAndTriggers(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.rc (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.rc VALUES (1, 0)",
		"CREATE VIEW `"+e.db+"`.rcv AS SELECT id, v FROM `"+e.db+"`.rc",
		"CREATE TABLE `"+e.db+"`.events (id INT AUTO_INCREMENT PRIMARY KEY, n INT)",
		"CREATE TRIGGER `"+e.db+"`.events_bump AFTER INSERT ON `"+e.db+"`.events FOR EACH ROW UPDATE `"+e.db+"`.rc SET v = NEW.n WHERE id = 1")
	admin := cacheTables(t, e, map[string]int64{"rc": 1})
	sessions := newPair(t, e, e.app)
	app := sessions.proxy
	read := func() string { return outcome(app, "SELECT v FROM rc WHERE id = 1") }
	read()
	for i, w := range []string{
		"UPDATE rcv SET v = 101 WHERE id = 1",
		"INSERT INTO events (n) VALUES (102)",
		"UPDATE rcv SET v = 103 WHERE id = 1",
		"INSERT INTO events (n) VALUES (104)",
	} {
		// Back in memory first, so that a stale copy could answer.
		waitSettled(t, admin, "rc", 1)
		read()
		if _, err := app.ExecContext(t.Context(), w); err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		got := read() // at once: before the binary log could tell
		if want := outcome(sessions.direct, "SELECT v FROM rc WHERE id = 1"); got != want {
			t.Errorf("write %d (%s), then a read through the proxy: %s; MariaDB: %s", i+1, w, got, want)
		}
	}
}
