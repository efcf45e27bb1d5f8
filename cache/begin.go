package cache

import (
	"errors"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// Deferred BEGIN. A transaction that reads only cached tables never needs
// the backend, yet BEGIN and COMMIT would each cost a round trip to it. So
// a plain BEGIN is answered by the proxy, which remembers that the
// transaction has not started in the backend yet; the first statement of
// the transaction that goes to the backend is preceded by a BEGIN there,
// and a COMMIT or ROLLBACK of a transaction that never reached the
// backend is answered by the proxy too. When that first statement is a
// read that changes nothing, BEGIN travels with it in one round trip
// (plugins.Statement.Begin); before anything else, it is sent alone.
//
// The transaction is the same as if BEGIN had gone first: InnoDB takes a
// REPEATABLE READ transaction's snapshot at its first read, not at BEGIN,
// and BEGIN itself takes no lock. START TRANSACTION WITH CONSISTENT
// SNAPSHOT, READ ONLY and READ WRITE, and anything inside a transaction,
// go to the backend as they are.

// beginDeferred answers a plain BEGIN when the session is not in a
// transaction, or a COMMIT or ROLLBACK of a deferred one.
func (p *Plugin) beginDeferred(st *plugins.Statement, si *sessionInfo) (plugins.Action, bool) {
	if si.deferred && !st.InTx {
		si.deferred = false // the session was reset (COM_RESET_CONNECTION, COM_CHANGE_USER)
	}
	// (Clients such as sysbench prepare BEGIN and COMMIT and execute
	// them: the same statements, answered the same way.)
	if st.Command != plugins.ComQuery && st.Command != plugins.ComStmtExecute || st.Backend == nil {
		return plugins.Continue, false
	}
	switch {
	case st.Kind == plugins.KindBegin && !st.InTx && isPlain(st.SQL, "BEGIN", "BEGIN WORK", "START TRANSACTION"):
		// Under LOCK TABLES a BEGIN releases the locks, which only the
		// backend can do; with completion_type CHAIN or RELEASE a COMMIT
		// does more than end the transaction.
		if st.Tx.TableLocks() {
			return plugins.Continue, false
		}
		if plain, known := st.Tx.PlainCompletion(); !plain || !known {
			return plugins.Continue, false
		}
		si.deferred = true
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			w.SetStatus(w.Status() | mysql.SERVER_STATUS_IN_TRANS)
			return w.WriteResult(nil)
		})), true
	case si.deferred && (st.Kind == plugins.KindCommit || st.Kind == plugins.KindRollback) &&
		isPlain(st.SQL, "COMMIT", "COMMIT WORK", "ROLLBACK", "ROLLBACK WORK"):
		si.deferred = false
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			w.SetStatus(w.Status() &^ mysql.SERVER_STATUS_IN_TRANS)
			return w.WriteResult(nil)
		})), true
	}
	return plugins.Continue, false
}

// startDeferred starts a deferred transaction in the backend, before a
// statement of it goes there.
func startDeferred(st *plugins.Statement, si *sessionInfo) *mysql.MyError {
	si.deferred = false
	r, err := st.Backend.Query("BEGIN")
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return me
		}
		return mysql.NewError(2013, "Lost connection to backend while starting the transaction")
	}
	r.Close()
	return nil
}

// isPlain reports whether sql is one of forms (upper case, single spaces),
// ignoring case, surrounding space, runs of space and one final ';'.
func isPlain(sql string, forms ...string) bool {
	s := strings.TrimSpace(sql)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	if len(s) > 20 {
		return false
	}
	s = strings.Join(strings.Fields(s), " ")
	for _, f := range forms {
		if strings.EqualFold(s, f) {
			return true
		}
	}
	return false
}
