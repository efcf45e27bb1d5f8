package cache

import (
	"errors"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the standalone parser

	"tableproxy/lease"
)

// Effect is what a statement does to cached tables, as far as the cache
// must know.
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
	Tables []lease.TableID // the written, altered or (for CACHE/NOCACHE) targeted tables
	// Targets are the tables whose definition a DDL statement changes;
	// Tables also has those it only reads (a view's, CREATE TABLE ...
	// SELECT's). DropSchema is the schema DROP DATABASE drops, tables
	// and all.
	Targets    []lease.TableID
	DropSchema string
	// TempCreated and TempDropped name the temporary tables the request
	// creates and drops (DROP TABLE without TEMPORARY drops the session's
	// temporary table of that name, if it has one, rather than the base
	// table). TempsUnknown: it may create, drop or rename temporary tables
	// it does not name (CALL, EXECUTE, RENAME, a stored function).
	TempCreated, TempDropped []lease.TableID
	TempsUnknown             bool
}

var parsers = sync.Pool{New: func() any { return parser.New() }}

var errMixedAdmin = errors.New("ALTER TABLE ... CACHE/NOCACHE must be a statement of its own")

// Analyze parses sql (one statement or several) and reports its effect on
// tables, resolving unqualified names against db. It errs on the side of
// caution: anything that could write a table it cannot name is
// EffectUnknown, and every table a writing statement mentions counts as
// written (a needless invalidation costs a reload; a missed one serves a
// stale row).
func Analyze(sql, db string) (Analysis, error) {
	if hidesCode(sql) {
		return Analysis{Effect: EffectUnknown, TempsUnknown: true}, nil
	}
	p := parsers.Get().(*parser.Parser)
	// The syntax tree belongs to the parser until its next parse: give the
	// parser back only when done with the tree.
	defer parsers.Put(p)
	stmts, _, err := p.ParseSQL(sql)
	if err != nil {
		return Analysis{Effect: EffectUnknown, TempsUnknown: true}, nil
	}
	var out Analysis
	for _, stmt := range stmts {
		if u, ok := stmt.(*ast.UseStmt); ok {
			db = u.DBName // later statements of the request resolve against it
		}
		a := analyzeOne(stmt, db)
		if a.Effect == EffectCache || a.Effect == EffectNoCache {
			if len(stmts) > 1 {
				return Analysis{}, errMixedAdmin
			}
			return a, nil
		}
		if a.Effect > out.Effect {
			out.Effect = a.Effect
		}
		out.Tables = appendUnique(out.Tables, a.Tables...)
		out.Targets = appendUnique(out.Targets, a.Targets...)
		if a.DropSchema != "" {
			out.DropSchema = a.DropSchema // (one DROP DATABASE per request is enough to refuse it)
		}
		out.TempCreated = append(out.TempCreated, a.TempCreated...)
		out.TempDropped = append(out.TempDropped, a.TempDropped...)
		out.TempsUnknown = out.TempsUnknown || a.TempsUnknown || a.Effect == EffectUnknown
	}
	return out, nil
}

func analyzeOne(stmt ast.StmtNode, db string) Analysis {
	switch n := stmt.(type) {
	case *ast.AlterTableStmt:
		if len(n.Specs) == 1 {
			switch n.Specs[0].Tp {
			case ast.AlterTableCache:
				return Analysis{Effect: EffectCache, Tables: []lease.TableID{tableID(n.Table, db)}}
			case ast.AlterTableNoCache:
				return Analysis{Effect: EffectNoCache, Tables: []lease.TableID{tableID(n.Table, db)}}
			}
		}
		a := Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db), Targets: []lease.TableID{tableID(n.Table, db)}}
		for _, spec := range n.Specs {
			if spec.Tp == ast.AlterTableRenameTable && spec.NewTable != nil {
				a.Targets = appendUnique(a.Targets, tableID(spec.NewTable, db))
				a.TempsUnknown = true // (the table renamed may be a temporary one)
			}
		}
		return a
	case *ast.CreateTableStmt:
		if n.TemporaryKeyword == ast.TemporaryLocal {
			// A session's own table: it changes no base table, but hides
			// one of its name from that session.
			return Analysis{Effect: EffectNone, TempCreated: []lease.TableID{tableID(n.Table, db)}}
		}
		return Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db), Targets: []lease.TableID{tableID(n.Table, db)}}
	case *ast.DropTableStmt:
		a := Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db)}
		if !n.IsView {
			for _, t := range n.Tables {
				a.TempDropped = append(a.TempDropped, tableID(t, db))
			}
			if n.TemporaryKeyword == ast.TemporaryLocal {
				return Analysis{Effect: EffectNone, TempDropped: a.TempDropped}
			}
		}
		a.Targets = a.Tables
		return a
	case *ast.CreateViewStmt:
		// The view's SELECT only reads its tables.
		return Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db), Targets: []lease.TableID{tableID(n.ViewName, db)}}
	case *ast.RenameTableStmt:
		a := Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db), TempsUnknown: true}
		a.Targets = a.Tables
		return a
	case *ast.DropDatabaseStmt:
		return Analysis{Effect: EffectDDL, DropSchema: strings.Clone(n.Name.O)}
	case *ast.LockTablesStmt, *ast.UnlockTablesStmt:
		// Locks change no table (the session's reads are followed: see
		// sessionInfo.tableLocks).
		return Analysis{Effect: EffectNone}
	case ast.DDLNode:
		a := Analysis{Effect: EffectDDL, Tables: collectTables(stmt, db)}
		a.Targets = a.Tables
		return a
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.LoadDataStmt:
		if callsUserFunction(stmt) {
			// A stored function in its values may write other tables.
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectWrite, Tables: collectTables(stmt, db)}
	case *ast.SelectStmt, *ast.SetOprStmt:
		// A SELECT can still write through a stored function or
		// SELECT ... INTO a variable; stored functions are user-defined
		// calls the parser cannot see into.
		if callsUserFunction(stmt) {
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectNone}
	case *ast.ShowStmt, *ast.ExplainStmt, *ast.SetStmt, *ast.UseStmt, *ast.BeginStmt,
		*ast.CommitStmt, *ast.RollbackStmt, *ast.SavepointStmt, *ast.ReleaseSavepointStmt,
		*ast.PrepareStmt, *ast.DeallocateStmt, *ast.KillStmt, *ast.DoStmt:
		if callsUserFunction(stmt) {
			return Analysis{Effect: EffectUnknown}
		}
		return Analysis{Effect: EffectNone}
	}
	// CALL, EXECUTE, handler statements, and whatever else: unknown.
	return Analysis{Effect: EffectUnknown, TempsUnknown: true}
}

// hidesCode reports whether sql has a MariaDB executable comment
// (/*M! ... */): MariaDB runs its text, which TiDB's parser skips as a
// comment, so the parsed statement may lack a write, a table or a
// function call that MariaDB will see.
func hidesCode(sql string) bool { return containsFold(sql, "/*M!") }

// tableID names t, copying the names: the parser's strings point into the
// statement text, which the proxy reuses for the next statement.
func tableID(t *ast.TableName, db string) lease.TableID {
	schema := t.Schema.O
	if schema == "" {
		schema = db
	}
	return lease.TableID{Schema: strings.Clone(schema), Table: strings.Clone(t.Name.O)}
}

// tableCollector gathers every table name in a statement.
type tableCollector struct {
	db     string
	tables []lease.TableID
}

func (c *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		c.tables = appendUnique(c.tables, tableID(t, c.db))
	}
	return n, false
}

func (c *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func collectTables(stmt ast.StmtNode, db string) []lease.TableID {
	c := &tableCollector{db: db}
	stmt.Accept(c)
	return c.tables
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

func callsUserFunction(stmt ast.StmtNode) bool {
	f := &funcFinder{}
	stmt.Accept(f)
	return f.found
}

func appendUnique(list []lease.TableID, ids ...lease.TableID) []lease.TableID {
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
