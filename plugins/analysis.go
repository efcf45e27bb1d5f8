package plugins

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the standalone parser

	"tableproxy/internal/sqllex"
)

// Parsing. A statement is parsed at most once, by the first plugin that
// asks for its tree or its analysis, with a parser of the proxy's one
// pool. The tree belongs to the parser until its next parse, so the
// statement holds the parser until the proxy is done with the statement
// (after the observers); what outlives it (the analysis) is copied out.
// Only the lexical Kind is computed for every statement: a point select
// that a plugin answers from a plan cached by its text is never parsed.

var parsers = sync.Pool{New: func() any { return parser.New() }}

// Parsed is a parse of a text with a parser of the proxy's pool. Stmts
// (or Err) stay valid until Release, which gives the parser back.
type Parsed struct {
	Stmts []ast.StmtNode
	Err   error
	p     *parser.Parser
}

// Parse parses sql (one statement or several) in the default SQL mode. A
// panic of the parser (its value driver, made for the parser's own tests,
// refuses some literals MariaDB accepts, such as integers of 82 digits) is
// a parse error, and that parser is not reused.
func Parse(sql string) (pd Parsed) {
	p := parsers.Get().(*parser.Parser)
	defer func() {
		if r := recover(); r != nil {
			pd = Parsed{Err: fmt.Errorf("the SQL parser failed on this statement: %v", r)}
		}
	}()
	stmts, _, err := p.ParseSQL(sql)
	return Parsed{Stmts: stmts, Err: err, p: p}
}

// Release gives the parser back: the tree must not be used after it.
func (pd *Parsed) Release() {
	if pd.p != nil {
		parsers.Put(pd.p)
	}
	*pd = Parsed{}
}

// Parsed returns the statement's syntax tree (its statements in order),
// parsing SQL on the first call. The tree is valid until the proxy is done
// with the statement: a plugin may read it in OnStatement and OnResult, and
// must copy the strings it keeps (they point into SQL).
func (st *Statement) Parsed() ([]ast.StmtNode, error) {
	if !st.parsed {
		st.tree = Parse(st.SQL)
		st.parsed = true
	}
	return st.tree.Stmts, st.tree.Err
}

// Finish ends the statement after its outcome out: the session's record of
// SQL-level prepared statements follows what the backend ran (a PREPARE
// refused by the proxy never reached it), and the parser goes back. The
// proxy calls it when the statement's chain is done.
func (st *Statement) Finish(out *Outcome) {
	if st.Command == ComQuery && out.Source == FromBackend && (st.Kind == KindOther || st.Kind == KindMulti || st.Kind == KindCompound) &&
		(ContainsFold(st.SQL, "PREPARE") || st.analyzed && len(st.analysis.prepared) > 0) {
		a, _ := st.Analysis()
		if len(a.prepared) > 0 {
			sessionPrepared(st.Session).apply(a.prepared, out.Err != nil)
		}
	}
	st.Release()
}

// Release gives back the parser that holds the statement's tree, if it was
// parsed.
func (st *Statement) Release() {
	if st.parsed {
		st.tree.Release()
		st.parsed = false
	}
}

// Analysis returns what the statement does to tables (see Analyze),
// computed from its tree on the first call, and kept for the other
// executions of a prepared statement.
func (st *Statement) Analysis() (Analysis, error) {
	if m := st.memo; m != nil && m.analyzed {
		return m.analysis, m.analysisErr
	}
	if st.analyzed {
		return st.analysis, st.analysisErr
	}
	a, err := analyzeRequest(st.SQL, st.DB, st.Dialect, sessionPrepared(st.Session))
	st.analysis, st.analysisErr, st.analyzed = a, err, true
	if m := st.memo; m != nil && !a.PerRequest {
		m.analysis, m.analysisErr, m.analyzed = a, err, true
	}
	return a, err
}

// TableID names a table: its schema (the one an unqualified name resolved
// against) and its name, as written.
type TableID struct {
	Schema string
	Table  string
}

// Effect is what a statement does to tables, as far as plugins that keep
// copies of tables or guard them must know.
type Effect uint8

const (
	EffectNone    Effect = iota // reads, or touches no table
	EffectCache                 // ALTER TABLE t CACHE
	EffectNoCache               // ALTER TABLE t NOCACHE
	EffectWrite                 // may change rows of Tables
	EffectDDL                   // changes the definition of Tables
	EffectUnknown               // cannot tell (unparsable, CALL, ...): may change any table
)

// Analysis is what Analyze found in one request (all its statements).
type Analysis struct {
	Effect Effect
	Tables []TableID // the written, altered or (for CACHE/NOCACHE) targeted tables
	// Targets are the tables whose definition a DDL statement changes;
	// Tables also has those it only reads (a view's, CREATE TABLE ...
	// SELECT's). DropSchema is the schema DROP DATABASE drops, tables
	// and all.
	Targets    []TableID
	DropSchema string
	// Dropped are the base tables the request drops or renames away (DROP
	// TABLE, RENAME TABLE's sources, ALTER TABLE ... RENAME): their names
	// no longer hold the tables they held.
	Dropped []TableID
	// TempCreated and TempDropped name the temporary tables the request
	// creates and drops (DROP TABLE without TEMPORARY drops the session's
	// temporary table of that name, if it has one, rather than the base
	// table). TempsUnknown: it may create, drop or rename temporary tables
	// it does not name (CALL, EXECUTE, RENAME, a stored function).
	TempCreated, TempDropped []TableID
	TempsUnknown             bool
	// Named is every table the request names, read or written, each once;
	// Unparsed, that part of it could not be read (the parser could not,
	// or its text is known only when it runs), so it may touch any table.
	Named    []TableID
	Unparsed bool
	// Written are the tables whose rows a statement of the request may
	// change (INSERT, UPDATE, DELETE, REPLACE, LOAD), whatever else it
	// does.
	Written []TableID
	// Why says why Effect is EffectUnknown.
	Why Conservative
	// Stmts are the statements the request runs, in order, with those
	// inside compound statements, EXECUTE IMMEDIATE and EXECUTE.
	Stmts []StmtInfo
	// Accounts: the request may change who may log in or with which
	// rights (GRANT, REVOKE, CREATE USER, SET PASSWORD, FLUSH, a write of
	// the mysql schema, or anything unknown). Role: it runs SET ROLE,
	// which changes the session's own rights. Session: it may change the
	// session's settings (SET, USE, a block, anything unknown). Programs:
	// it may create or drop a stored program or trigger.
	Accounts, Role, Session, Programs bool
	// PerRequest: the account depends on the session (PREPARE,
	// EXECUTE) or on the request's literals (EXECUTE IMMEDIATE 'text'),
	// so it must not be kept for the text, or the shape, of the request.
	PerRequest bool
	// prepared are the request's PREPAREs and DEALLOCATEs, for the
	// session's record once the backend has run them (Statement.Finish).
	prepared []preparedChange
	// IndexOnly: every statement of the request is a DDL statement that
	// only adds secondary indexes (ADD INDEX / KEY / UNIQUE, CREATE
	// INDEX), so no row and no column of its tables changes: a copy of
	// them stays exact. (ALTER IGNORE TABLE ... ADD UNIQUE deletes rows,
	// and adding a primary key changes the key rows are ordered by:
	// neither is index-only.)
	IndexOnly bool
}

var errMixedAdmin = errors.New("ALTER TABLE ... CACHE/NOCACHE must be a statement of its own")

// Analyze parses sql (one statement or several) and reports its effect on
// tables, resolving unqualified names against db, for a backend of unknown
// version (see AnalyzeFor). It errs on the side of caution: anything that
// could write a table it cannot name is EffectUnknown, and every table a
// writing statement mentions counts as written (a needless invalidation
// costs a reload; a missed one serves a stale row).
func Analyze(sql, db string) (Analysis, error) {
	return analyzeRequest(sql, db, sqllex.Dialect{}, nil)
}

// AnalyzeFor is Analyze for a backend of dialect d.
func AnalyzeFor(sql, db string, d sqllex.Dialect) (Analysis, error) {
	return analyzeRequest(sql, db, d, nil)
}

// AddsIndexesOnly reports whether stmt only adds secondary indexes to a
// table: ALTER TABLE with nothing but ADD INDEX / KEY / UNIQUE clauses (and
// ALGORITHM or LOCK), or CREATE [UNIQUE] INDEX. ALTER IGNORE TABLE is
// not, as MariaDB's deletes the rows that duplicate a new UNIQUE key (the
// parser drops the word, so the statement's text is read for it).
func AddsIndexesOnly(stmt ast.StmtNode) bool {
	switch n := stmt.(type) {
	case *ast.CreateIndexStmt:
		return true
	case *ast.AlterTableStmt:
		if len(n.Specs) == 0 || AlterIgnore(stmt.Text()) {
			return false
		}
		adds := false
		for _, spec := range n.Specs {
			switch spec.Tp {
			case ast.AlterTableAlgorithm, ast.AlterTableLock:
			case ast.AlterTableAddConstraint:
				if spec.Constraint == nil {
					return false
				}
				switch spec.Constraint.Tp {
				case ast.ConstraintIndex, ast.ConstraintKey, ast.ConstraintUniq, ast.ConstraintUniqKey,
					ast.ConstraintUniqIndex, ast.ConstraintFulltext:
					adds = true
				default:
					return false // PRIMARY KEY, FOREIGN KEY, CHECK
				}
			default:
				return false
			}
		}
		return adds
	}
	return false
}

// AlterIgnore reports whether an ALTER statement's text may be ALTER
// IGNORE TABLE, which the TiDB parser accepts and drops the IGNORE of:
// any word between ALTER and TABLE (IGNORE, ONLINE), or an executable
// comment before TABLE, which may hold one.
func AlterIgnore(sql string) bool {
	if !strings.EqualFold(FirstKeyword(sql), "ALTER") {
		return false
	}
	_, i := wordAt(sql, 0)
	w, j := wordAt(sql, i)
	head := sql[:j]
	return !strings.EqualFold(w, "TABLE") || strings.Contains(head, "/*!") || strings.Contains(head, "/*M!")
}

// namedIn lists the tables stmts name, following USE from statement to
// statement.
func namedIn(stmts []ast.StmtNode, db string) []TableID {
	c := &tableCollector{db: db}
	for _, stmt := range stmts {
		if u, ok := stmt.(*ast.UseStmt); ok {
			c.db = u.DBName
		}
		stmt.Accept(c)
	}
	return c.tables
}

func analyzeOne(stmt ast.StmtNode, db string) Analysis {
	switch n := stmt.(type) {
	case *ast.AlterTableStmt:
		if len(n.Specs) == 1 {
			switch n.Specs[0].Tp {
			case ast.AlterTableCache:
				return Analysis{Effect: EffectCache, Tables: []TableID{TableOf(n.Table, db)}}
			case ast.AlterTableNoCache:
				return Analysis{Effect: EffectNoCache, Tables: []TableID{TableOf(n.Table, db)}}
			}
		}
		a := Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db), Targets: []TableID{TableOf(n.Table, db)}}
		for _, spec := range n.Specs {
			if spec.Tp == ast.AlterTableRenameTable && spec.NewTable != nil {
				a.Targets = appendUnique(a.Targets, TableOf(spec.NewTable, db))
				a.Dropped = appendUnique(a.Dropped, TableOf(n.Table, db))
				a.TempsUnknown = true // (the table renamed may be a temporary one)
			}
		}
		return a
	case *ast.CreateTableStmt:
		if n.TemporaryKeyword == ast.TemporaryLocal {
			// A session's own table: it changes no base table, but hides
			// one of its name from that session.
			return Analysis{Effect: EffectNone, TempCreated: []TableID{TableOf(n.Table, db)}}
		}
		return Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db), Targets: []TableID{TableOf(n.Table, db)}}
	case *ast.DropTableStmt:
		a := Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db)}
		if !n.IsView {
			for _, t := range n.Tables {
				a.TempDropped = append(a.TempDropped, TableOf(t, db))
			}
			if n.TemporaryKeyword == ast.TemporaryLocal {
				return Analysis{Effect: EffectNone, TempDropped: a.TempDropped}
			}
			a.Dropped = a.TempDropped
		}
		a.Targets = a.Tables
		return a
	case *ast.CreateViewStmt:
		// The view's SELECT only reads its tables.
		return Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db), Targets: []TableID{TableOf(n.ViewName, db)}}
	case *ast.RenameTableStmt:
		a := Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db), TempsUnknown: true}
		a.Targets = a.Tables
		var from, to []TableID
		for _, tt := range n.TableToTables {
			from, to = append(from, TableOf(tt.OldTable, db)), append(to, TableOf(tt.NewTable, db))
		}
		a.Dropped = renamedAway(from, to)
		return a
	case *ast.OptimizeTableStmt:
		// (InnoDB rebuilds the table: a new definition, as far as a copy
		// of it knows.)
		a := Analysis{Effect: EffectDDL}
		for _, t := range n.Tables {
			a.Tables = appendUnique(a.Tables, TableOf(t, db))
		}
		a.Targets = a.Tables
		return a
	case *ast.DropDatabaseStmt:
		return Analysis{Effect: EffectDDL, DropSchema: strings.Clone(n.Name.O)}
	case *ast.LockTablesStmt, *ast.UnlockTablesStmt:
		// Locks change no table (the proxy follows the session's locks).
		return Analysis{Effect: EffectNone}
	case ast.DDLNode:
		a := Analysis{Effect: EffectDDL, Tables: TablesIn(stmt, db)}
		a.Targets = a.Tables
		return a
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.LoadDataStmt:
		if CallsUserFunction(stmt) {
			// A stored function in its values may write other tables.
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectWrite, Tables: TablesIn(stmt, db)}
	case *ast.SelectStmt, *ast.SetOprStmt:
		// A SELECT can still write through a stored function or
		// SELECT ... INTO a variable; stored functions are user-defined
		// calls the parser cannot see into.
		if CallsUserFunction(stmt) {
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectNone}
	case *ast.ShowStmt, *ast.ExplainStmt, *ast.SetStmt, *ast.UseStmt, *ast.BeginStmt,
		*ast.CommitStmt, *ast.RollbackStmt, *ast.SavepointStmt, *ast.ReleaseSavepointStmt,
		*ast.PrepareStmt, *ast.DeallocateStmt, *ast.KillStmt, *ast.DoStmt:
		if CallsUserFunction(stmt) {
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectNone}
	}
	// CALL, EXECUTE, handler statements, and whatever else: unknown.
	return Analysis{Effect: EffectUnknown, TempsUnknown: true}
}

// HidesCode reports whether sql has a MariaDB executable comment
// (/*M! ... */): MariaDB runs its text, which TiDB's parser skips as a
// comment, so the parsed statement may lack a write, a table or a
// function call that MariaDB will see.
func HidesCode(sql string) bool { return ContainsFold(sql, "/*M!") }

// TableOf names t, unqualified in db, copying the names: the parser's
// strings point into the statement text, which the proxy reuses for the
// next statement.
func TableOf(t *ast.TableName, db string) TableID {
	schema := t.Schema.O
	if schema == "" {
		schema = db
	}
	return TableID{Schema: strings.Clone(schema), Table: strings.Clone(t.Name.O)}
}

// tableCollector gathers every table name in a statement.
type tableCollector struct {
	db     string
	tables []TableID
}

func (c *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		c.tables = appendUnique(c.tables, TableOf(t, c.db))
	}
	return n, false
}

func (c *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// TablesIn lists the tables node names, each once, unqualified names in db.
func TablesIn(node ast.Node, db string) []TableID {
	c := &tableCollector{db: db}
	node.Accept(c)
	return c.tables
}

// renamedAway are the names a RENAME TABLE a TO b[, c TO d ...] leaves
// without a table: its sources that no rename of it fills again (RENAME
// TABLE t TO t_old, t_new TO t leaves t holding a table, as a swap does).
func renamedAway(from, to []TableID) []TableID {
	var out []TableID
	for _, f := range from {
		filled := false
		for _, t := range to {
			if t == f {
				filled = true
			}
		}
		if !filled {
			out = appendUnique(out, f)
		}
	}
	return out
}

// sequenceFinder gathers the sequences that NEXTVAL / NEXT VALUE FOR and
// SETVAL advance: each call writes the sequence's table.
type sequenceFinder struct {
	db   string
	seqs []TableID
}

func (f *sequenceFinder) Enter(n ast.Node) (ast.Node, bool) {
	if fc, ok := n.(*ast.FuncCallExpr); ok && (fc.FnName.L == "nextval" || fc.FnName.L == "setval") && len(fc.Args) > 0 {
		if t, ok := fc.Args[0].(*ast.TableNameExpr); ok && t.Name != nil {
			f.seqs = appendUnique(f.seqs, TableOf(t.Name, f.db))
		}
	}
	return n, false
}

func (f *sequenceFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// SequencesAdvanced lists the sequences node advances (NEXTVAL, NEXT VALUE
// FOR, SETVAL), unqualified names in db.
func SequencesAdvanced(node ast.Node, db string) []TableID {
	f := &sequenceFinder{db: db}
	node.Accept(f)
	return f.seqs
}

// funcFinder reports calls of functions the parser does not know as
// built-ins, which may be stored functions with side effects.
type funcFinder struct{ found bool }

func (f *funcFinder) Enter(n ast.Node) (ast.Node, bool) {
	if fc, ok := n.(*ast.FuncCallExpr); ok && (fc.Schema.L != "" || !isBuiltin(fc.FnName.L)) {
		f.found = true
	}
	return n, f.found
}

func (f *funcFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// CallsUserFunction reports whether node calls a function that is not one
// of the parser's built-ins: a stored function, which may write any table.
func CallsUserFunction(node ast.Node) bool {
	f := &funcFinder{}
	node.Accept(f)
	return f.found
}

func appendUnique(list []TableID, ids ...TableID) []TableID {
next:
	for _, id := range ids {
		for _, have := range list {
			if have == id {
				continue next
			}
		}
		list = append(list, id)
	}
	return list
}

// ContainsFold reports whether s contains the upper-case ASCII word w,
// ignoring case.
func ContainsFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for ; j < len(w); j++ {
			c := s[i+j]
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			if c != w[j] {
				break
			}
		}
		if j == len(w) {
			return true
		}
	}
	return false
}
