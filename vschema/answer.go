package vschema

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/cache"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// OnStatement answers the statements that read the virtual schema, and
// lets every other pass.
func (s *Schema) OnStatement(st *plugins.Statement) plugins.Action {
	in := inSchema(st)
	switch st.Kind {
	case plugins.KindSelect, plugins.KindShow, plugins.KindWith, plugins.KindUse, plugins.KindMulti:
		if !in && !mentionsSchema(st.SQL) {
			return plugins.Continue
		}
	case plugins.KindSet, plugins.KindBegin, plugins.KindCommit, plugins.KindRollback, plugins.KindKill, plugins.KindAdmin:
		return plugins.Continue // no table of the session's database
	default:
		if !in {
			return plugins.Continue
		}
	}
	db := st.DB
	if in {
		db = Name
	}
	stmts, err := st.Parsed()
	switch {
	case in && st.Kind != plugins.KindSelect && st.Kind != plugins.KindShow && st.Kind != plugins.KindWith && st.Kind != plugins.KindUse &&
		st.Kind != plugins.KindMulti:
		return s.guardOther(stmts, err == nil)
	case err != nil || len(stmts) == 0:
		return plugins.Continue // the backend says what is wrong with it
	case len(stmts) > 1:
		for _, stmt := range stmts {
			if virtual, _ := s.tablesOf(stmt, db); len(virtual) > 0 {
				return refuse(notSupported("several statements in one request"))
			}
		}
		return plugins.Continue
	}
	return s.answer(stmts[0], db, st)
}

// answer answers one parsed statement, or lets it pass.
func (s *Schema) answer(stmt ast.StmtNode, db string, st *plugins.Statement) plugins.Action {
	switch x := stmt.(type) {
	case *ast.SelectStmt:
		return s.selectStmt(x, db, st)
	case *ast.ShowStmt:
		return s.show(x, db, st)
	case *ast.ExplainStmt: // DESCRIBE t
		if show, ok := x.Stmt.(*ast.ShowStmt); ok {
			return s.show(show, db, st)
		}
	case *ast.UseStmt:
		if st.Command == plugins.ComQuery {
			return use(x, st)
		}
	case *ast.SetOprStmt:
		if virtual, _ := s.tablesOf(x, db); len(virtual) > 0 {
			return refuse(notSupported("UNION, EXCEPT and INTERSECT"))
		}
	}
	return plugins.Continue
}

// selectStmt answers a SELECT of virtual tables.
func (s *Schema) selectStmt(sel *ast.SelectStmt, db string, st *plugins.Statement) plugins.Action {
	virtual, others := s.tablesOf(sel, db)
	if len(virtual) == 0 {
		return plugins.Continue
	}
	if others > 0 {
		return refuse(notSupported("a statement that reads both tableproxy tables and the backend's"))
	}
	for _, tn := range virtual {
		if _, ok := s.tables[tn.Name.L]; !ok {
			return refuse(mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", Name, tn.Name.O)))
		}
	}
	if e := s.checkColumns(sel); e != nil {
		return refuse(e)
	}
	if st.Command == plugins.ComStmtPrepare {
		columns, e := cache.VirtualColumns(sel, db, s.snapshots(st), paramMarkers(sel))
		if e != nil {
			return refuse(e)
		}
		return prepareAs(sel, columns)
	}
	resp, e := cache.SelectVirtual(inGroupOrder(sel), db, s.snapshots(st), st)
	if e != nil {
		return refuse(e)
	}
	return plugins.AnswerWith(resp)
}

// inGroupOrder gives a GROUP BY or a DISTINCT without an ORDER BY the
// order MariaDB gives it, sorted by its columns. The evaluator answers
// only what it can prove is the backend's order, and leaves groups and
// distinct rows that no ORDER BY sorts to the backend; these tables have
// no backend, and sorted is the order their users see from MariaDB. The
// statement is copied, not changed: the chain shares its parse.
func inGroupOrder(sel *ast.SelectStmt) *ast.SelectStmt {
	if sel.OrderBy != nil {
		return sel
	}
	var by []*ast.ByItem
	switch {
	case sel.GroupBy != nil:
		by = sel.GroupBy.Items
	case sel.Distinct && sel.Fields != nil:
		for _, f := range sel.Fields.Fields {
			if f.WildCard != nil {
				return sel
			}
			by = append(by, &ast.ByItem{Expr: f.Expr})
		}
	}
	if len(by) == 0 {
		return sel
	}
	cp := *sel
	cp.OrderBy = &ast.OrderByClause{Items: by}
	return &cp
}

// snapshots returns the lookup of a statement's tables: each table's rows
// read once, at its first lookup.
func (s *Schema) snapshots(st *plugins.Statement) func(lease.TableID) *cache.Snapshot {
	seen := map[string]*cache.Snapshot{}
	return func(id lease.TableID) *cache.Snapshot {
		if !strings.EqualFold(id.Schema, Name) {
			return nil
		}
		name := strings.ToLower(id.Table)
		if snap, ok := seen[name]; ok {
			return snap
		}
		t, ok := s.tables[name]
		if !ok {
			return nil
		}
		snap := cache.NewVirtualSnapshot(Name, name, t.columns, t.numeric, t.rows(st))
		seen[name] = snap
		return snap
	}
}

// tablesOf returns the tables of the virtual schema stmt names, and how
// many other tables it names.
func (s *Schema) tablesOf(stmt ast.Node, db string) (virtual []*ast.TableName, others int) {
	v := &tableNames{}
	stmt.Accept(v)
	ctes := map[string]bool{}
	for _, name := range v.ctes {
		ctes[name] = true
	}
	for _, tn := range v.names {
		schema := tn.Schema.O
		switch {
		case schema == "" && ctes[tn.Name.L]:
			others++ // a common table expression: the evaluator has none
		case schema == "":
			schema = db
		}
		if strings.EqualFold(schema, Name) {
			virtual = append(virtual, tn)
		} else {
			others++
		}
	}
	return virtual, others
}

// tableNames collects the table names of a statement.
type tableNames struct {
	names []*ast.TableName
	ctes  []string
}

func (v *tableNames) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableName:
		v.names = append(v.names, x)
	case *ast.WithClause:
		for _, c := range x.CTEs {
			v.ctes = append(v.ctes, c.Name.L)
		}
	}
	return n, false
}

func (v *tableNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func refuse(e *mysql.MyError) plugins.Action { return plugins.RefuseWith(e) }

func notSupported(what string) *mysql.MyError { return cache.VirtualUnsupported(what) }
