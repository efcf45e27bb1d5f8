package cache

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/cache/eval"
	"tableproxy/plugins"
)

// Why a statement was or was not answered from memory: each session keeps
// its last statement's outcome, shown by EXPLAIN LAST STATEMENT (and the
// virtual table tableproxy.last_statement), which themselves leave it as
// it was.

// lastStatementColumns are the columns of EXPLAIN LAST STATEMENT.
var lastStatementColumns = []string{"statement", "served_from", "reason"}

// maxExplainedSQL bounds the statement text kept per session.
const maxExplainedSQL = 4096

// explanation is the outcome of a session's last statement.
type explanation struct {
	sql    []byte // the statement (truncated), in a buffer reused per session
	served bool
	why    eval.Why
}

// explain records the outcome of the session's current statement, and
// counts a statement that went to the backend by its reason.
func (p *Plugin) explain(si *sessionInfo, sql string, served bool, why eval.Why) {
	if len(sql) > maxExplainedSQL {
		sql = sql[:maxExplainedSQL]
	}
	si.last.sql = append(si.last.sql[:0], sql...)
	si.last.served, si.last.why = served, why
	if !served && why.Declined() {
		p.passReasons[why.Reason].Add(1)
	}
}

func (e *explanation) row() []any {
	if e.sql == nil {
		return []any{"", "", "no statement yet in this session"}
	}
	from := "backend"
	if e.served {
		from = "proxy"
	}
	why := e.why.Text
	if e.served && why == "" {
		why = "answered from the cached table in memory"
	}
	return []any{string(e.sql), from, why}
}

// isExplainLast reports whether sql is EXPLAIN LAST STATEMENT.
func isExplainLast(sql string) bool {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(sql), ";"))
	return len(f) == 3 && strings.EqualFold(f[0], "EXPLAIN") && strings.EqualFold(f[1], "LAST") && strings.EqualFold(f[2], "STATEMENT")
}

// explainLast answers EXPLAIN LAST STATEMENT.
func (p *Plugin) explainLast(st *plugins.Statement) plugins.Action {
	row := session(st).last.row()
	fields := make([]*mysql.Field, len(lastStatementColumns))
	for i, c := range lastStatementColumns {
		fields[i] = virtualField(virtualSchema, "last_statement", c, false)
	}
	binaryProto := st.Command == plugins.ComStmtExecute
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		return writeRows(w, fields, [][]any{row}, binaryProto)
	}))
}
