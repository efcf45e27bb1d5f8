package ddloffload

import (
	"sync"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser"

	"tableproxy/plugins"
)

func TestFenceHoldsOnlyStatementsOnTheTable(t *testing.T) {
	var f fence
	pool := &sync.Pool{New: func() any { return parser.New() }}
	var waitsIn func(st *plugins.Statement) bool
	release := f.hold(tableKey{"db", "t"})
	if !f.active() {
		t.Fatal("fence not active")
	}
	waits := func(sql string, inTx bool) bool {
		return waitsIn(&plugins.Statement{SQL: sql, DB: "db", InTx: inTx, Session: &plugins.SessionState{}})
	}
	waitsIn = func(st *plugins.Statement) bool {
		done := make(chan struct{})
		go func() {
			f.wait(st, pool, 5*time.Second)
			close(done)
		}()
		select {
		case <-done:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	for sql, want := range map[string]bool{
		"SELECT * FROM t WHERE id = 1":        true,
		"UPDATE db.t SET a = 1":               true,
		"INSERT INTO u SELECT * FROM t":       true,
		"SELECT * FROM other.t":               false,
		"SELECT 1":                            false,
		"UPDATE u SET a = 1":                  false,
		"this is not SQL at all":              true, // unparsable: may touch anything
		"SELECT * FROM `t` JOIN u USING (id)": true,
	} {
		if got := waits(sql, false); got != want {
			t.Errorf("%s: held %v, want %v", sql, got, want)
		}
	}
	if waits("UPDATE t SET a = 1", true) {
		t.Error("a statement inside a transaction open before the fence was held")
	}
	// A transaction begun during the fence holds nothing on the table yet:
	// its statements on it are held; the transaction's others are not.
	sess := &plugins.SessionState{}
	if waitsIn(&plugins.Statement{SQL: "BEGIN", DB: "db", Session: sess}) {
		t.Error("BEGIN was held")
	}
	if waitsIn(&plugins.Statement{SQL: "UPDATE u SET a = 1", DB: "db", InTx: true, Session: sess}) {
		t.Error("a new transaction's statement on another table was held")
	}
	if !waitsIn(&plugins.Statement{SQL: "SELECT * FROM t", DB: "db", InTx: true, Session: sess}) {
		t.Error("a new transaction's statement on the table was not held")
	}
	// Held statements go on when the fence is released, and within the bound.
	st := &plugins.Statement{SQL: "SELECT * FROM t", DB: "db"}
	start := time.Now()
	go func() { time.Sleep(30 * time.Millisecond); release() }()
	f.wait(st, pool, 5*time.Second)
	if d := time.Since(start); d < 25*time.Millisecond || d > time.Second {
		t.Errorf("released after %s", d)
	}
	if f.active() {
		t.Error("fence still active after release")
	}
	release2 := f.hold(tableKey{"db", "t"})
	defer release2()
	start = time.Now()
	f.wait(st, pool, 40*time.Millisecond)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("bounded wait took %s", d)
	}
}
