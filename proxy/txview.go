package proxy

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/plugins"
)

// A session's transaction, as the proxy follows it: the one account of it
// that plugins read (plugins.TxView). It is learned from the status flags
// of every response (in a transaction, autocommit), from the statements
// relayed and their outcome (BEGIN, COMMIT, ROLLBACK, SET, LOCK and UNLOCK
// TABLES, FLUSH TABLES WITH READ LOCK, DDL's implicit commit through the
// flags, resets of the session), and, for the isolation level and
// completion_type when a statement may have changed them otherwise (SET
// from an expression, a CALL), from the backend, once, when a plugin asks.

// Transactions is the proxy's transaction clock and the record of every
// session's transaction (plugins.Transactions). Give one to both the chain
// (plugins.Env) and the server (Config.Transactions).
type Transactions struct {
	clock    atomic.Uint64
	mu       sync.Mutex // guards sessions; taken when a session starts or ends, and by OpenBefore
	sessions map[uint32]*txRecord
}

// NewTransactions returns a clock at zero with no sessions.
func NewTransactions() *Transactions {
	return &Transactions{sessions: map[uint32]*txRecord{}}
}

// Mark implements plugins.Transactions.
func (t *Transactions) Mark() uint64 { return t.clock.Add(1) }

// OpenBefore implements plugins.Transactions.
func (t *Transactions) OpenBefore(mark uint64) []uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []uint32
	for id, r := range t.sessions {
		if r.open.Load() && r.since.Load() < mark {
			ids = append(ids, id)
		}
	}
	return ids
}

func (t *Transactions) add(id uint32, r *txRecord) {
	t.mu.Lock()
	t.sessions[id] = r
	t.mu.Unlock()
}

func (t *Transactions) remove(id uint32, r *txRecord) {
	t.mu.Lock()
	if t.sessions[id] == r {
		delete(t.sessions, id)
	}
	t.mu.Unlock()
}

// txRecord is the part of a session's transaction other goroutines read
// (Transactions.OpenBefore). The session writes it on every statement, so
// it is atomics: no lock on the hot path.
type txRecord struct {
	// open: the session is in a transaction, or has a statement under way
	// that may begin one.
	open atomic.Bool
	// since is the clock when the session was last seen outside a
	// transaction: its current transaction began then or later.
	since atomic.Uint64
}

// sessionTx is the session's transaction and the settings that decide how
// one runs. Only the session's goroutine touches it but rec.
type sessionTx struct {
	s   *session
	txs *Transactions
	rec txRecord
	seq uint64
	// opaque, nextTxPending, tableLocks: see plugins.TxView.
	opaque, nextTxPending, tableLocks bool
	// isolation and completion are the session's values when known (read
	// from the backend, or set by a SET the proxy read).
	isolation, completion           string
	isolationKnown, completionKnown bool
}

func (t *sessionTx) Seq() uint64         { return t.seq }
func (t *sessionTx) Opaque() bool        { return t.opaque }
func (t *sessionTx) Since() uint64       { return t.rec.since.Load() }
func (t *sessionTx) NextTxPending() bool { return t.nextTxPending }
func (t *sessionTx) TableLocks() bool    { return t.tableLocks }

func (t *sessionTx) Autocommit() bool { return t.s.status&mysql.SERVER_STATUS_AUTOCOMMIT != 0 }

func (t *sessionTx) Isolation() string {
	if !t.isolationKnown {
		t.readVars()
	}
	return t.isolation
}

func (t *sessionTx) PlainCompletion() (plain, known bool) {
	if !t.completionKnown {
		t.readVars()
	}
	return t.completion == "NO_CHAIN", t.completionKnown
}

// reset follows a reset of the session's state in the backend (a new
// backend connection, COM_RESET_CONNECTION): whatever transaction it had
// has ended, and its settings are the server's defaults, to be read again.
func (t *sessionTx) reset() {
	t.seq++
	t.rec.open.Store(false)
	t.opaque, t.nextTxPending, t.tableLocks = false, false, false
	t.isolationKnown, t.completionKnown = false, false
}

// isolationVars name the isolation level: MariaDB has tx_isolation, MySQL 8
// only transaction_isolation. isolationVar is the index of the one the
// backend took, tried first; the other is tried when the backend refuses it.
var isolationVars = [2]string{"tx_isolation", "transaction_isolation"}

// readVars reads the isolation level and completion_type from the backend.
func (t *sessionTx) readVars() {
	s := t.s
	if s.backend == nil {
		return
	}
	first := s.srv.isolationVar.Load()
	for i := range isolationVars {
		v := (int(first) + i) % len(isolationVars)
		r, err := s.backend.Execute("SELECT @@" + isolationVars[v] + ", @@completion_type")
		s.noteBackendError(err)
		var me *mysql.MyError
		if errors.As(err, &me) {
			continue // the other name, then
		}
		if err != nil {
			return
		}
		s.srv.isolationVar.Store(int32(v))
		iso, _ := r.GetString(0, 0)
		ct, _ := r.GetString(0, 1)
		r.Close()
		t.isolation, t.isolationKnown = strings.Clone(iso), true // (go-mysql's strings point into a pooled buffer)
		t.completion, t.completionKnown = completionName(ct), true
		return
	}
}

// completionName is completion_type's value by name ("" if unknown).
func completionName(v string) string {
	switch strings.ToUpper(v) {
	case "NO_CHAIN", "0":
		return "NO_CHAIN"
	case "CHAIN", "1":
		return "CHAIN"
	case "RELEASE", "2":
		return "RELEASE"
	}
	return ""
}

// starting records that st is about to run: outside a transaction, any
// statement may begin one (BEGIN, or any once autocommit is off), so the
// session counts as open from now until its outcome says otherwise. DDL
// commits whatever is open and begins nothing.
func (t *sessionTx) starting(st *plugins.Statement) {
	t.rec.open.Store(st.Kind != plugins.KindDDL)
	if !st.InTx {
		// Stored after open, so that a Mark this load missed finds the
		// session open with an older clock, and counts it as open before.
		t.rec.since.Store(t.txs.clock.Load())
	}
}

// ended follows st's outcome: out.Status says whether the session is in a
// transaction now. A statement prepared runs nothing.
func (t *sessionTx) ended(st *plugins.Statement, out *plugins.Outcome) {
	after := out.Status&mysql.SERVER_STATUS_IN_TRANS != 0
	t.rec.open.Store(after)
	if st.Command == plugins.ComStmtPrepare {
		return
	}
	before := st.InTx
	involved := before || after
	single := plugins.SingleStatement(st.SQL)
	afresh := false
	switch st.Kind {
	case plugins.KindSelect, plugins.KindInsert, plugins.KindUpdate, plugins.KindDelete, plugins.KindReplace,
		plugins.KindShow, plugins.KindUse: // (SHOW, EXPLAIN and USE leave the transaction as it is)
		t.opaque = t.opaque || involved && !single // a request of several statements: any of them may be anything
	case plugins.KindBegin, plugins.KindCommit, plugins.KindRollback:
		if single && !plugins.ContainsFold(st.SQL, " TO ") {
			afresh = true
		} else {
			t.opaque = t.opaque || involved
		}
	default:
		t.opaque = t.opaque || involved
	}
	if st.Kind == plugins.KindSet && plugins.ContainsFold(st.SQL, "TRANSACTION") {
		// SET TRANSACTION ... applies to the next transaction only.
		t.nextTxPending = true
	}
	if before && !after {
		t.nextTxPending = false
	}
	if afresh || before && !after {
		t.seq++
		t.opaque = false
	}
	if out.Source == plugins.FromBackend {
		t.followLocks(st, out, single)
		t.followVars(st, out, single)
	}
}

// followLocks follows the table locks a statement the backend ran takes
// or releases.
func (t *sessionTx) followLocks(st *plugins.Statement, out *plugins.Outcome, single bool) {
	if out.Err != nil && single {
		return
	}
	switch {
	case !single && plugins.ContainsFold(st.SQL, "LOCK"):
		t.tableLocks = true // one of them may lock: assume so until UNLOCK TABLES
	case st.Kind == plugins.KindBegin:
		t.tableLocks = false // BEGIN releases table locks in the backend
	case st.Kind == plugins.KindOther: // (LOCK, UNLOCK and FLUSH are of no other kind)
		switch w := plugins.FirstKeyword(st.SQL); {
		case strings.EqualFold(w, "LOCK") || strings.EqualFold(w, "FLUSH") && plugins.ContainsFold(st.SQL, "LOCK"):
			t.tableLocks = true
		case strings.EqualFold(w, "UNLOCK"):
			t.tableLocks = false
		}
	}
}

// followVars follows the isolation level and completion_type through a
// statement the backend ran: a SET of either to a value the proxy reads
// sets it; anything else that may change session variables (a SET of an
// expression, CALL, a request of several statements, a statement of no
// plain kind) leaves them to be read from the backend.
func (t *sessionTx) followVars(st *plugins.Statement, out *plugins.Outcome, single bool) {
	switch st.Kind {
	case plugins.KindSelect, plugins.KindInsert, plugins.KindUpdate, plugins.KindDelete, plugins.KindReplace,
		plugins.KindBegin, plugins.KindCommit, plugins.KindRollback, plugins.KindShow, plugins.KindUse:
		if single || st.Command != plugins.ComQuery {
			return
		}
	case plugins.KindSet:
		if single && out.Err == nil && t.readSet(st) {
			return
		}
	}
	t.isolationKnown, t.completionKnown = false, false
}

// readSet applies a SET the backend ran to the isolation level and
// completion_type, and reports whether it could: each is set to a name,
// or untouched.
func (t *sessionTx) readSet(st *plugins.Statement) bool {
	if !plugins.ContainsFold(st.SQL, "ISOLATION") && !plugins.ContainsFold(st.SQL, "COMPLETION") &&
		!strings.Contains(st.SQL, "(") {
		return true // neither named, nor a function called that could set them
	}
	stmts, err := st.Parsed()
	if err != nil || len(stmts) != 1 || plugins.CallsUserFunction(stmts[0]) {
		return false
	}
	set, ok := stmts[0].(*ast.SetStmt)
	if !ok {
		return true // SET NAMES, PASSWORD, ROLE, ...
	}
	for _, v := range set.Variables {
		if v.IsGlobal || !v.IsSystem {
			continue
		}
		switch strings.ToLower(v.Name) {
		case "tx_isolation", "transaction_isolation":
			iso := isolationName(setName(v.Value))
			if iso == "" {
				return false
			}
			t.isolation, t.isolationKnown = iso, true
		case "completion_type":
			ct := completionName(setName(v.Value))
			if ct == "" {
				return false
			}
			t.completion, t.completionKnown = ct, true
		}
	}
	return true
}

// setName is the name a SET assigns (a string, or a bare word such as
// CHAIN), or "".
func setName(e ast.ExprNode) string {
	switch x := e.(type) {
	case ast.ValueExpr:
		if s, ok := x.GetValue().(string); ok {
			return s
		}
	case *ast.ColumnNameExpr:
		if x.Name.Table.L == "" {
			return x.Name.Name.O
		}
	}
	return ""
}

// isolationName is an isolation level as the server prints it, or "".
func isolationName(v string) string {
	switch v = strings.ReplaceAll(strings.ToUpper(v), " ", "-"); v {
	case "READ-UNCOMMITTED", "READ-COMMITTED", "REPEATABLE-READ", "SERIALIZABLE":
		return strings.Clone(v)
	}
	return ""
}
