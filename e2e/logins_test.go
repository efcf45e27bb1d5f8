package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// TestLoginsAfterAccountChanges: MariaDB checks an account when a
// connection logs in, and keeps its database rights from then on. A
// session that starts through the proxy after the account changed must
// get what a direct login gets, not a pooled connection logged in before
// the change: refused after a REVOKE of its database or an account lock,
// let in again after a GRANT, whether the change went to MariaDB directly
// (seen in the binary log) or through the proxy.
func TestLoginsAfterAccountChanges(t *testing.T) {
	e := newCacheEnv(t)
	b := e.backend
	b.Exec(t, "CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY)")
	admin := e.open(t, e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil { // (so the proxy follows the binary log)
		t.Fatal(err)
	}
	waitSettled(t, admin, "kv", 0)
	login := func(addr string) error {
		db, err := sql.Open("mysql", testdb.DSN(addr, e.app.name, e.app.password, e.db, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var one int
		return db.QueryRow("SELECT 1").Scan(&one)
	}
	code := func(err error) uint16 {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return me.Number
		}
		return 0
	}
	forApp := func(stmt string) []string {
		var out []string
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			out = append(out, fmt.Sprintf(stmt, fmt.Sprintf("'%s'@'%s'", e.app.name, host)))
		}
		return out
	}
	// Each step: a session through the proxy (its backend connection is
	// pooled when it ends), a change, then a new login through the proxy
	// must go as a direct one does.
	step := func(what string, change func()) {
		t.Helper()
		if err := login(e.proxy.addr); err != nil && code(err) == 0 {
			t.Fatalf("%s: a login before the change: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond) // the connection is reset and pooled
		change()
		want := login(b.Addr)
		waitFor(t, 3*time.Second, what+": a login through the proxy as a direct one", func() (bool, error) {
			got := login(e.proxy.addr)
			return code(got) == code(want) && (got == nil) == (want == nil), fmt.Errorf("proxy: %v; direct: %v", got, want)
		})
	}
	step("REVOKE on MariaDB", func() { b.Exec(t, forApp("REVOKE ALL ON `"+e.db+"`.* FROM %s")...) })
	step("GRANT on MariaDB", func() { b.Exec(t, forApp("GRANT ALL ON `"+e.db+"`.* TO %s")...) })
	step("ACCOUNT LOCK on MariaDB", func() { b.Exec(t, forApp("ALTER USER %s ACCOUNT LOCK")...) })
	step("ACCOUNT UNLOCK on MariaDB", func() { b.Exec(t, forApp("ALTER USER %s ACCOUNT UNLOCK")...) })
}
