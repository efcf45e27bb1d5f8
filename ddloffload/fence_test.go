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
	release := f.hold(tableKey{"db", "t"})
	if !f.active() {
		t.Fatal("fence not active")
	}
	waits := func(sql string, inTx bool) bool {
		st := &plugins.Statement{SQL: sql, DB: "db", InTx: inTx}
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
		t.Error("a statement inside a transaction was held")
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
