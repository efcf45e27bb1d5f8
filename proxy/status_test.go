package proxy

import (
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// statusAnswerer answers `SELECT 'answered'` with a result set and `DO 0`
// with an OK, and records what the session's status looked like to it and
// to the observers.
type statusAnswerer struct {
	mu       sync.Mutex
	seen     []uint16 // ResponseWriter.Status() in each answer
	outcomes []uint16 // Outcome.Status of each statement
}

func (*statusAnswerer) Name() string { return "status-answerer" }

func (a *statusAnswerer) OnStatement(st *plugins.Statement) plugins.Action {
	if st.SQL != "SELECT 'answered'" && st.SQL != "DO 0" {
		return plugins.Continue
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		a.mu.Lock()
		a.seen = append(a.seen, w.Status())
		a.mu.Unlock()
		if st.SQL == "DO 0" {
			return w.WriteResult(nil)
		}
		rs, err := mysql.BuildSimpleResultset([]string{"v"}, [][]any{{"x"}}, false)
		if err != nil {
			return err
		}
		return w.WriteResult(mysql.NewResult(rs))
	}))
}

func (a *statusAnswerer) OnResult(_ *plugins.Statement, out *plugins.Outcome) {
	a.mu.Lock()
	a.outcomes = append(a.outcomes, out.Status)
	a.mu.Unlock()
}

// An answer the proxy writes carries the session's state (autocommit, in
// a transaction, ...), never the bits that described the backend's answer
// to the statement before it (here: no index used, after a full scan).
func TestAnsweredStatusCarriesOnlySessionState(t *testing.T) {
	a := &statusAnswerer{}
	c := connectThrough(t, plugins.NewChain(a))
	for _, q := range []string{"CREATE TABLE t (a INT)", "INSERT INTO t VALUES (1), (2), (3)"} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const scan = "SELECT a FROM t WHERE a > 1"
	steps := []struct {
		sql  string
		want uint16
	}{
		{scan, mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_NO_INDEX_USED},
		{"SELECT 'answered'", mysql.SERVER_STATUS_AUTOCOMMIT},
		{scan, mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_NO_INDEX_USED},
		{"DO 0", mysql.SERVER_STATUS_AUTOCOMMIT},
		{"BEGIN", mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS},
		{scan, mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_NO_INDEX_USED},
		{"SELECT 'answered'", mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS},
		{scan, mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_NO_INDEX_USED},
		{"DO 0", mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS},
		{"COMMIT", mysql.SERVER_STATUS_AUTOCOMMIT},
	}
	for _, s := range steps {
		r, err := c.Execute(s.sql)
		if err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
		if r.Status != s.want {
			t.Errorf("%s: status %#x, want %#x", s.sql, r.Status, s.want)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, st := range a.seen {
		if st&^sessionStatusFlags != 0 {
			t.Errorf("answer %d: the plugin was shown status %#x, with bits of an earlier statement", i, st)
		}
	}
	// Observers are told what the client was sent: the scan's own bits
	// included.
	if n := len(a.outcomes); n < len(steps) {
		t.Fatalf("%d outcomes, want at least %d", n, len(steps))
	}
	scanOutcome := a.outcomes[len(a.outcomes)-len(steps)]
	if scanOutcome&mysql.SERVER_STATUS_NO_INDEX_USED == 0 {
		t.Errorf("the scan's outcome has status %#x, without its no-index-used bit", scanOutcome)
	}
}
