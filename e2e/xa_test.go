package e2e

import (
	"testing"
	"time"
)

// TestPreparedXASurvivesTheSession: a session that prepares an XA
// transaction and disconnects leaves it to XA COMMIT from another
// session, as directly; the proxy must not put its backend connection,
// transaction and all, back in the pool (COM_RESET_CONNECTION keeps a
// prepared XA transaction there).
func TestPreparedXASurvivesTheSession(t *testing.T) {
	e := newEnv(t, 1)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.x (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+e.db+"`.x VALUES (1, 10)")
	a := e.connectWithCollation(t, e.proxied(), "utf8mb4_general_ci")
	for _, q := range []string{"XA START 'tp-k'", "UPDATE x SET v = v + 1 WHERE id = 1", "XA END 'tp-k'", "XA PREPARE 'tp-k'"} {
		if _, err := a.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	a.Close()
	// XA COMMIT from another session; retried while the first one's end
	// reaches the backend.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b := e.connectWithCollation(t, e.proxied(), "utf8mb4_general_ci")
		_, err = b.Execute("XA COMMIT 'tp-k'")
		b.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("XA COMMIT: %v", err)
	}
	for i := 0; i < 4; i++ {
		c := e.connectWithCollation(t, e.proxied(), "utf8mb4_general_ci")
		r, err := c.Execute("SELECT v FROM x WHERE id = 1")
		if err != nil {
			t.Fatalf("session %d after XA COMMIT: %v", i+1, err)
		}
		if v, _ := r.GetInt(0, 0); v != 11 {
			t.Fatalf("session %d after XA COMMIT: v = %d, want 11", i+1, v)
		}
		c.Close()
	}
}
