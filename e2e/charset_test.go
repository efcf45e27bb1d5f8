package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// TestSessionCharsetMatchesDirect: a session starts with the character set
// and collation the backend gives the client's handshake collation on a
// fresh direct connection, also on a pooled backend connection that an
// earlier session switched to another character set. Collation 255
// (utf8mb4_0900_ai_ci, what go-mysql and MySQL 8 clients send) is unknown
// to MariaDB 10.11, which then falls back to its defaults.
func TestSessionCharsetMatchesDirect(t *testing.T) {
	e := newEnv(t, 1)
	for _, collation := range []string{"utf8mb4_0900_ai_ci", "latin1_swedish_ci", "utf8mb4_general_ci"} {
		t.Run(collation, func(t *testing.T) {
			want := sessionCharset(t, e.connectWithCollation(t, e.direct(), collation))
			// Each session switches to another character set before it
			// ends; the next one, on the same backend connection, must
			// not notice.
			reused := 0
			var lastThread string
			for i := 0; i < 3; i++ {
				c := e.connectWithCollation(t, e.proxied(), collation)
				thread := threadID(t, c)
				deadline := time.Now().Add(10 * time.Second)
				for thread != lastThread && lastThread != "" && time.Now().Before(deadline) {
					// Until the last session's connection is back in the
					// pool, sessions get new ones; this one stays open, so
					// that it is not pooled ahead of it.
					time.Sleep(5 * time.Millisecond)
					c = e.connectWithCollation(t, e.proxied(), collation)
					thread = threadID(t, c)
				}
				if thread == lastThread {
					reused++
				}
				if got := sessionCharset(t, c); got != want {
					t.Errorf("session %d (backend thread %s): %s through the proxy, %s directly", i+1, thread, got, want)
				}
				if _, err := c.Execute("SET NAMES cp1251"); err != nil {
					t.Fatal(err)
				}
				c.Close()
				lastThread = thread
			}
			if reused == 0 {
				t.Fatal("no session reused a pooled backend connection")
			}
		})
	}
}

// connectWithCollation opens a go-mysql client connection to ep that sends
// collation in its handshake, closed when t ends.
func (e *env) connectWithCollation(t *testing.T, ep endpoint, collation string) *client.Conn {
	t.Helper()
	u := e.user()
	c, err := client.ConnectWithTimeout(ep.addr, u.name, u.password, e.db, 5*time.Second, func(c *client.Conn) error {
		return c.SetCollation(collation)
	})
	if err != nil {
		t.Fatalf("%s: connect with %s: %v", ep.name, collation, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionCharset reads the character set variables of c's session.
func sessionCharset(t *testing.T, c *client.Conn) string {
	t.Helper()
	r, err := c.Execute("SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var vars []string
	for i := 0; i < 4; i++ {
		v, _ := r.GetString(0, i)
		vars = append(vars, v)
	}
	return strings.Join(vars, "/")
}

// threadID is the backend thread of c's session.
func threadID(t *testing.T, c *client.Conn) string {
	t.Helper()
	r, err := c.Execute("SELECT CONNECTION_ID()")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	id, _ := r.GetString(0, 0)
	return id
}
