package ddloffload

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// fakeTxs stands for the proxy's account of transactions, as the tests
// drive it: a session's Since is the clock when its last statement
// outside a transaction arrived (start), and the session is open from then
// until an outcome (end) says otherwise.
type fakeTxs struct {
	mu    sync.Mutex
	clock uint64
	txs   map[*plugins.SessionState]*fakeTx
}

type fakeTx struct {
	plugins.TxView // (only Since is read)
	conn           uint32
	since          atomic.Uint64
	open           bool
}

func (tx *fakeTx) Since() uint64 { return tx.since.Load() }

func newFakeTxs() *fakeTxs { return &fakeTxs{txs: map[*plugins.SessionState]*fakeTx{}} }

func (f *fakeTxs) Mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock++
	return f.clock
}

func (f *fakeTxs) OpenBefore(mark uint64) []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []uint32
	for _, tx := range f.txs {
		if tx.open && tx.since.Load() < mark {
			ids = append(ids, tx.conn)
		}
	}
	return ids
}

// start is what the proxy does as st arrives, before the chain sees it.
func (f *fakeTxs) start(st *plugins.Statement) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tx, ok := f.txs[st.Session]
	if !ok {
		tx = &fakeTx{conn: st.ConnID}
		f.txs[st.Session] = tx
	}
	tx.open = st.Kind != plugins.KindDDL
	if !st.InTx {
		tx.since.Store(f.clock)
	}
	st.Tx = tx
}

// end is what the proxy does with st's outcome.
func (f *fakeTxs) end(st *plugins.Statement, out *plugins.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txs[st.Session].open = out.Status&mysql.SERVER_STATUS_IN_TRANS != 0
}

func TestFenceHoldsOnlyStatementsOnTheTable(t *testing.T) {
	var f fence
	txs := newFakeTxs()
	f.txs = txs
	var waitsIn func(st *plugins.Statement) bool
	_, release := f.hold(plugins.TableID{Schema: "db", Table: "t"})
	if !f.active() {
		t.Fatal("fence not active")
	}
	waits := func(sql string, inTx bool) bool {
		return waitsIn(&plugins.Statement{SQL: sql, DB: "db", InTx: inTx, Session: &plugins.SessionState{}})
	}
	waitsIn = func(st *plugins.Statement) bool {
		done := make(chan struct{})
		txs.start(st)
		go func() {
			f.wait(st, 5*time.Second)
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
	f.wait(st, 5*time.Second)
	if d := time.Since(start); d < 25*time.Millisecond || d > time.Second {
		t.Errorf("released after %s", d)
	}
	if f.active() {
		t.Error("fence still active after release")
	}
	_, release2 := f.hold(plugins.TableID{Schema: "db", Table: "t"})
	defer release2()
	start = time.Now()
	f.wait(st, 40*time.Millisecond)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("bounded wait took %s", d)
	}
}

// Two tables fenced one after the other: a transaction begun between the
// two fences is held by the first (begun since it) but not by the second.
func TestFenceEpochIsPerTable(t *testing.T) {
	var f fence
	txs := newFakeTxs()
	f.txs = txs
	_, releaseT := f.hold(plugins.TableID{Schema: "db", Table: "t"})
	defer releaseT()
	sess := &plugins.SessionState{}
	txs.start(&plugins.Statement{SQL: "BEGIN", DB: "db", Session: sess})
	_, releaseU := f.hold(plugins.TableID{Schema: "db", Table: "u"})
	defer releaseU()
	held := func(sql string) bool {
		st := &plugins.Statement{SQL: sql, DB: "db", InTx: true, Session: sess}
		txs.start(st)
		start := time.Now()
		f.wait(st, 40*time.Millisecond)
		return time.Since(start) >= 30*time.Millisecond
	}
	if !held("SELECT * FROM t") {
		t.Error("a statement on t of a transaction begun during t's fence was not held")
	}
	if held("SELECT * FROM u") {
		t.Error("a statement on u of a transaction begun before u's fence was held")
	}
}

// A BEGIN another plugin answers (the cache, before this one on the chain)
// never reaches this plugin's OnStatement: during a fence it begins a
// transaction of the fence all the same, whose statements on the table are
// held and which the swap does not wait for. A statement the fence holds
// outside a transaction is not waited for either: it cannot go on before
// the swap ends.
func TestFenceAnsweredBeginAndHeldStatements(t *testing.T) {
	var f fence
	txs := newFakeTxs()
	f.txs = txs
	inTx := &plugins.Outcome{Status: mysql.SERVER_STATUS_IN_TRANS}
	idle := &plugins.Outcome{}
	a := &plugins.SessionState{}
	sel := &plugins.Statement{ConnID: 1, SQL: "SELECT 1", Kind: plugins.KindSelect, Session: a}
	txs.start(sel)
	txs.end(sel, idle)
	epoch, release := f.hold(plugins.TableID{Schema: "db", Table: "t"})
	defer release()
	begin := &plugins.Statement{ConnID: 1, SQL: "BEGIN", Kind: plugins.KindBegin, Session: a}
	txs.start(begin) // answered earlier on the chain
	txs.end(begin, inTx)
	if got := f.openBefore(epoch); len(got) != 0 {
		t.Errorf("a BEGIN answered during the fence counts as open before it: %v", got)
	}
	st := &plugins.Statement{ConnID: 1, SQL: "UPDATE t SET a = 1", DB: "db", Kind: plugins.KindUpdate, InTx: true, Session: a}
	txs.start(st)
	start := time.Now()
	f.wait(st, 40*time.Millisecond)
	if time.Since(start) < 30*time.Millisecond {
		t.Error("a statement on the table of a transaction begun by an answered BEGIN during the fence was not held")
	}

	// A session that read the old epoch just before the fence went up,
	// then is held: not waited for.
	b := &plugins.SessionState{}
	sb := &plugins.Statement{ConnID: 2, SQL: "SELECT * FROM t", DB: "db", Kind: plugins.KindSelect, Session: b}
	txs.start(sb)
	sb.Tx.(*fakeTx).since.Store(epoch - 1)
	done := make(chan struct{})
	go func() { f.wait(sb, time.Second); close(done) }()
	time.Sleep(20 * time.Millisecond)
	if got := f.openBefore(epoch); len(got) != 0 {
		t.Errorf("a held statement counts as open before the fence: %v", got)
	}
	release()
	<-done
}
