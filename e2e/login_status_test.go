package e2e

import (
	"testing"
)

// TestLoginStatusFollowsBackend: a session starts with autocommit as the
// backend starts it (its global value), on a new backend connection and on
// a pooled one, in the status of the login's OK packet and of the first
// statement's. Drivers read autocommit from that status.
func TestLoginStatusFollowsBackend(t *testing.T) {
	e := newEnv(t, 1)
	e.backend.Exec(t, "SET GLOBAL autocommit = 0")
	t.Cleanup(func() { e.backend.Exec(t, "SET GLOBAL autocommit = 1") })
	for i := 0; i < 3; i++ {
		for _, ep := range e.endpoints() {
			c := e.connectWithCollation(t, ep, "utf8mb4_general_ci")
			if c.IsAutoCommit() {
				t.Errorf("session %d, %s: the login's status has autocommit on; the backend's global autocommit is off", i+1, ep.name)
			}
			r, err := c.Execute("SELECT @@autocommit")
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := r.GetInt(0, 0); v != 0 || c.IsAutoCommit() {
				t.Errorf("session %d, %s: @@autocommit %d, status autocommit %v", i+1, ep.name, v, c.IsAutoCommit())
			}
			c.Close() // (the proxy's backend connection goes back to its pool)
		}
	}
}
