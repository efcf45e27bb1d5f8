package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/testdb"
)

// TestPooledConnectionIsAFreshLogin: a session on a pooled backend
// connection starts as a direct login does at that moment, whatever the
// session before it did and whatever changed globally since: the
// account's default role (not the one the last session set), the global
// sql_mode and wait_timeout in force now, and, for an interactive client,
// interactive_timeout as its wait_timeout.
func TestPooledConnectionIsAFreshLogin(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	pw := "pool-pw"
	user := b.NewUser(t, pw, "ALL", db)
	role, other := user+"_r1", user+"_r2"
	b.Exec(t, "CREATE ROLE "+role, "CREATE ROLE "+other)
	t.Cleanup(func() { b.Exec(t, "DROP ROLE IF EXISTS "+role, "DROP ROLE IF EXISTS "+other) })
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		acct := fmt.Sprintf("'%s'@'%s'", user, host)
		b.Exec(t, "GRANT "+role+" TO "+acct, "GRANT "+other+" TO "+acct, "SET DEFAULT ROLE "+role+" FOR "+acct)
	}
	root := b.Root(t)
	var mode string
	var wait int
	var interactiveTimeout int
	if err := root.QueryRow("SELECT @@GLOBAL.sql_mode, @@GLOBAL.wait_timeout, @@GLOBAL.interactive_timeout").Scan(&mode, &wait, &interactiveTimeout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Exec(t, fmt.Sprintf("SET GLOBAL sql_mode = '%s', wait_timeout = %d, interactive_timeout = %d", mode, wait, interactiveTimeout))
	})
	px := startProxy(t, b.Addr, account{user, pw})

	const probe = "SELECT CURRENT_ROLE(), @@sql_mode, @@wait_timeout, @@session.interactive_timeout"
	state := func(addr string, interactive bool, before ...string) string {
		t.Helper()
		// (go-mysql's client does not send CLIENT_INTERACTIVE: its dialer
		// sets it in the handshake response, as the mariadb client does.)
		dialer := func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, address)
			if err != nil || !interactive {
				return c, err
			}
			return &interactiveConn{Conn: c}, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.ConnectWithDialer(ctx, "tcp", addr, user, pw, db, dialer)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, q := range before {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		r, err := c.Execute(probe)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := 0; i < 4; i++ {
			v, _ := r.GetString(0, i)
			out = append(out, v)
		}
		return strings.Join(out, " | ")
	}
	for _, interactive := range []bool{false, true} {
		// A session sets another role and session values, and ends: its
		// backend connection goes back to the pool.
		state(px.addr, interactive, "SET ROLE "+other, "SET SESSION sql_mode = ''", "SET SESSION wait_timeout = 77")
		time.Sleep(200 * time.Millisecond) // (pooled in the background)
		// The globals change.
		b.Exec(t, fmt.Sprintf("SET GLOBAL sql_mode = 'STRICT_ALL_TABLES', wait_timeout = %d, interactive_timeout = %d",
			wait+interactiveBool(interactive)+7, interactiveTimeout+interactiveBool(interactive)+3))
		got, want := state(px.addr, interactive), state(b.Addr, interactive)
		if got != want {
			t.Errorf("interactive %v: the next session through the proxy starts with\n  %s\nwhere a direct login has\n  %s", interactive, got, want)
		}
		t.Logf("interactive %v: %s", interactive, want)
		if interactive && !strings.Contains(want, fmt.Sprintf("| %d |", interactiveTimeout+4)) {
			t.Errorf("a direct interactive login's wait_timeout is not interactive_timeout: %s", want)
		}
		b.Exec(t, fmt.Sprintf("SET GLOBAL sql_mode = '%s', wait_timeout = %d", mode, wait))
	}
}

// interactiveConn sets CLIENT_INTERACTIVE in the handshake response it
// writes (the second packet of the connection).
type interactiveConn struct {
	net.Conn
	done bool
}

func (c *interactiveConn) Write(b []byte) (int, error) {
	if !c.done && len(b) >= 8 && b[3] == 1 {
		c.done = true
		caps := binary.LittleEndian.Uint32(b[4:]) | mysql.CLIENT_INTERACTIVE
		binary.LittleEndian.PutUint32(b[4:], caps)
	}
	return c.Conn.Write(b)
}

func interactiveBool(b bool) int {
	if b {
		return 1
	}
	return 0
}
