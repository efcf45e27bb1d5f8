package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestCachedAnswerStatusMatchesBackend: the status word of an answer from
// memory is the one MariaDB sends for the same statement, whatever the
// statement before it was. A full scan's answer says "no index used"; the
// point read after it, answered by the proxy, must not repeat that.
func TestCachedAnswerStatusMatchesBackend(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.codes (id INT PRIMARY KEY, code VARCHAR(8), n DECIMAL(6,2))",
		"INSERT INTO `"+e.db+"`.codes SELECT seq, CONCAT('c', seq), seq / 4 FROM mysql.seq_1_to_50",
		"CREATE TABLE `"+e.db+"`.events (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.events SELECT seq, seq FROM mysql.seq_1_to_50")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE codes CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, "codes", "ready", 50, 1)

	connect := func(addr string) *client.Conn {
		t.Helper()
		c, err := client.ConnectWithTimeout(addr, e.app.name, e.app.password, e.db, 5*time.Second)
		if err != nil {
			t.Fatalf("connect to %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	direct, proxied := connect(e.backend.Addr), connect(e.proxy.addr)

	const scan = "SELECT id FROM events WHERE v > 2" // not cached: always the backend's
	const point = "SELECT id, code FROM codes WHERE id = 7"
	const rangeRead = "SELECT id FROM codes WHERE id > 40"
	statements := []string{
		scan, point, point, scan, point, // the second point read is the first from memory
		scan, rangeRead, rangeRead, scan, rangeRead,
		"BEGIN", scan, point, scan, rangeRead, "COMMIT",
		scan, point,
	}
	for _, q := range statements {
		want := execStatus(t, direct, q)
		got := execStatus(t, proxied, q)
		if got != want {
			t.Errorf("%s: status %#04x through the proxy, %#04x directly (served from %s)", q, got, want, servedFrom(t, proxied, q))
		}
	}
	// The test means something only if the scan's bits differ from the
	// point read's, and the point read was answered from memory.
	if s := execStatus(t, direct, scan); s&mysql.SERVER_STATUS_NO_INDEX_USED == 0 {
		t.Fatalf("the scan's status %#04x does not say no index was used", s)
	}
	execStatus(t, proxied, scan)
	if from := servedFrom(t, proxied, scan); from != "backend" {
		t.Fatalf("the scan was served from %s, want backend", from)
	}
	execStatus(t, proxied, point)
	if from := servedFrom(t, proxied, point); from != "proxy" {
		t.Fatalf("the point read was served from %s, want proxy", from)
	}
}

// execStatus runs q on c and returns the status word of its final packet.
func execStatus(t *testing.T, c *client.Conn, q string) uint16 {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer r.Close()
	return r.Status
}

// servedFrom says where the session's last statement, q, was answered.
func servedFrom(t *testing.T, c *client.Conn, q string) string {
	t.Helper()
	r, err := c.Execute("EXPLAIN LAST STATEMENT")
	if err != nil {
		t.Fatalf("EXPLAIN LAST STATEMENT: %v", err)
	}
	defer r.Close()
	stmt, _ := r.GetString(0, 0)
	from, _ := r.GetString(0, 1)
	if !strings.EqualFold(stmt, q) {
		return fmt.Sprintf("? (EXPLAIN LAST STATEMENT explains %q)", stmt)
	}
	return from
}
