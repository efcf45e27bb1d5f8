package vschema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/plugins"
)

// USE tableproxy is answered here: the backend has no such database. The
// session's database on the backend stays the one it was, and from then
// on, until the next USE, unqualified names of this session's SELECT and
// SHOW statements resolve to the virtual schema; a statement of another
// kind that names a table without its schema is refused rather than run
// against that other database. The proxy hands COM_INIT_DB, which the
// mysql client's own `use` command sends, to the chain as a USE statement,
// so it is answered here too.

// sessionKey keys a session's state: whether it is in the virtual schema.
type sessionKey struct{}

func inSchema(st *plugins.Statement) bool {
	in, _ := st.Session.Get(sessionKey{}).(bool)
	return in
}

// use answers USE tableproxy, and notes that a USE of another database
// leaves it.
func use(x *ast.UseStmt, st *plugins.Statement) plugins.Action {
	in := strings.EqualFold(x.DBName, Name)
	if st.Session != nil && (in || inSchema(st)) {
		st.Session.Set(sessionKey{}, in)
	}
	if !in {
		return plugins.Continue
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		return w.WriteResult(nil)
	}))
}

// guardOther refuses, in the virtual schema, a statement other than a
// SELECT or SHOW that names a table without its schema (or that the
// proxy cannot parse, so may): the backend would resolve it against the
// session's other database.
func (s *Schema) guardOther(stmts []ast.StmtNode, parsed bool) plugins.Action {
	refused := refuse(notSupported("in database tableproxy only SELECT and SHOW of its tables are answered; name other tables with their database, or USE it first"))
	if !parsed {
		return refused
	}
	for _, stmt := range stmts {
		v := &tableNames{}
		stmt.Accept(v)
		for _, tn := range v.names {
			if tn.Schema.O == "" {
				return refused
			}
		}
	}
	return plugins.Continue
}
