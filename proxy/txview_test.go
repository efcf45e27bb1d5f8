package proxy

import (
	"slices"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// OpenBefore lists the sessions whose transaction began before a mark and
// is still open, as far as the proxy knows: from their BEGIN (even one
// still under way, or one a plugin answers) to the result that ends the
// transaction.
func TestTransactionsOpenBefore(t *testing.T) {
	txs := NewTransactions()
	inTx := &plugins.Outcome{Status: mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT}
	idle := &plugins.Outcome{Status: mysql.SERVER_STATUS_AUTOCOMMIT}
	sessions := map[uint32]*sessionTx{}
	stmt := func(id uint32, sql string, kind plugins.Kind, tx bool) *plugins.Statement {
		s, ok := sessions[id]
		if !ok {
			s = &sessionTx{s: &session{}, txs: txs}
			sessions[id] = s
			txs.add(id, &s.rec)
		}
		st := &plugins.Statement{ConnID: id, SQL: sql, Kind: kind, InTx: tx}
		s.starting(st)
		return st
	}
	ended := func(st *plugins.Statement, out *plugins.Outcome) { sessions[st.ConnID].ended(st, out) }
	ended(stmt(1, "BEGIN", plugins.KindBegin, false), inTx) // open, nothing read yet
	ended(stmt(2, "SELECT 1", plugins.KindSelect, false), idle)
	stmt(3, "BEGIN", plugins.KindBegin, false) // under way
	ended(stmt(4, "ALTER TABLE t ADD INDEX i (c)", plugins.KindDDL, false), idle)
	stmt(4, "ALTER TABLE t ADD INDEX j (c)", plugins.KindDDL, false) // waits for its job
	mark := txs.Mark()
	ended(stmt(2, "BEGIN", plugins.KindBegin, false), inTx) // begun after the mark
	got := txs.OpenBefore(mark)
	slices.Sort(got)
	if !slices.Equal(got, []uint32{1, 3}) {
		t.Errorf("open before the mark: %v, want [1 3]", got)
	}
	ended(stmt(1, "COMMIT", plugins.KindCommit, true), idle)
	txs.remove(3, &sessions[3].rec)
	if got := txs.OpenBefore(mark); len(got) != 0 {
		t.Errorf("open before the mark after COMMIT and close: %v", got)
	}
}

// The session's transaction as plugins see it, through the statements that
// start, end and taint transactions, take and release table locks, and
// set the isolation level and completion_type.
func TestSessionTxFollowsStatements(t *testing.T) {
	s := &session{status: mysql.SERVER_STATUS_AUTOCOMMIT}
	tx := &sessionTx{s: s, txs: NewTransactions()}
	tx.isolation, tx.isolationKnown = "REPEATABLE-READ", true
	tx.completion, tx.completionKnown = "NO_CHAIN", true
	run := func(sql string, inTx bool, status uint16, err *mysql.MyError) {
		t.Helper()
		st := &plugins.Statement{}
		st.Reset(plugins.ComQuery, sql)
		st.InTx = inTx
		tx.starting(st)
		s.status = status
		tx.ended(st, &plugins.Outcome{Source: plugins.FromBackend, Status: status, Err: err})
	}
	const (
		idle = mysql.SERVER_STATUS_AUTOCOMMIT
		open = mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS
	)

	seq := tx.Seq()
	run("BEGIN", false, open, nil)
	if tx.Seq() == seq || tx.Opaque() {
		t.Fatalf("BEGIN: seq %d (was %d), opaque %v", tx.Seq(), seq, tx.Opaque())
	}
	seq = tx.Seq()
	run("SELECT 1", true, open, nil)
	run("UPDATE t SET a = 1", true, open, nil)
	if tx.Seq() != seq || tx.Opaque() {
		t.Errorf("plain reads and writes changed the transaction: seq %d, opaque %v", tx.Seq(), tx.Opaque())
	}
	run("SAVEPOINT s", true, open, nil)
	if !tx.Opaque() {
		t.Error("a savepoint left the transaction followed")
	}
	run("ROLLBACK TO s", true, open, nil)
	if tx.Seq() != seq || !tx.Opaque() {
		t.Errorf("ROLLBACK TO: seq %d (was %d), opaque %v", tx.Seq(), seq, tx.Opaque())
	}
	run("COMMIT", true, idle, nil)
	if tx.Seq() == seq || tx.Opaque() {
		t.Errorf("COMMIT: seq unchanged or still opaque")
	}
	seq = tx.Seq()
	run("SELECT 1; SELECT 2", false, idle, nil)
	if tx.Opaque() || tx.Seq() != seq {
		t.Error("several statements outside a transaction made one opaque")
	}

	run("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", false, idle, nil)
	if !tx.NextTxPending() || tx.Isolation() != "REPEATABLE-READ" {
		t.Errorf("SET TRANSACTION: pending %v, isolation %q", tx.NextTxPending(), tx.Isolation())
	}
	run("BEGIN", false, open, nil)
	run("COMMIT", true, idle, nil)
	if tx.NextTxPending() {
		t.Error("still pending after the next transaction ended")
	}
	run("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", false, idle, nil)
	if !tx.isolationKnown || tx.isolation != "READ-COMMITTED" {
		t.Errorf("after SET SESSION TRANSACTION: %q (known %v)", tx.isolation, tx.isolationKnown)
	}
	run("SET @@session.tx_isolation = @level", false, idle, nil)
	if tx.isolationKnown {
		t.Error("an isolation level set from a variable counts as known")
	}
	run("SET completion_type = CHAIN, sql_mode = ''", false, idle, nil)
	if plain, known := tx.PlainCompletion(); plain || !known {
		t.Errorf("completion_type CHAIN: plain %v, known %v", plain, known)
	}
	run("SET NAMES utf8mb4", false, idle, nil)
	if !tx.completionKnown {
		t.Error("SET NAMES forgot completion_type")
	}
	run("CALL p()", false, idle, nil)
	if tx.completionKnown {
		t.Error("completion_type still known after a CALL")
	}

	run("LOCK TABLES t READ", false, idle, nil)
	if !tx.TableLocks() {
		t.Error("LOCK TABLES not followed")
	}
	run("UNLOCK TABLES", false, idle, nil)
	run("FLUSH TABLES WITH READ LOCK", false, idle, nil)
	if !tx.TableLocks() {
		t.Error("FLUSH TABLES WITH READ LOCK not followed")
	}
	run("BEGIN", false, open, nil)
	if tx.TableLocks() {
		t.Error("BEGIN did not release the table locks")
	}
	run("LOCK TABLES t WRITE", true, idle, mysql.NewError(mysql.ER_LOCK_WAIT_TIMEOUT, "timeout"))
	if tx.TableLocks() {
		t.Error("a LOCK TABLES that failed counts")
	}
	if !tx.Autocommit() {
		t.Error("autocommit not read from the status")
	}
	s.status = 0
	if tx.Autocommit() {
		t.Error("autocommit off not read from the status")
	}
}
