package vschema

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"

	"tableproxy/cache"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// SHOW TABLES and SHOW COLUMNS (DESCRIBE) of the virtual schema. Each
// answer is a table of its own, with the columns the backend's SHOW has,
// filtered by its LIKE or WHERE through the same evaluator as a SELECT.

// The virtual tables' column types, as SHOW COLUMNS prints them (see
// cache.NewVirtualSnapshot).
const (
	bigintType    = "bigint(20)"
	varcharType   = "varchar(1024)"
	varcharColl   = "utf8mb4_bin"
	virtualKind   = "SYSTEM VIEW" // SHOW FULL TABLES' Table_type, as for information_schema
	showTableName = "show"
)

// show answers SHOW TABLES and SHOW COLUMNS of the virtual schema; other
// SHOW statements about it get 1235.
func (s *Schema) show(x *ast.ShowStmt, db string, st *plugins.Statement) plugins.Action {
	var columns []string
	var rows [][]any
	var filterColumn string // the column a LIKE filters
	switch x.Tp {
	case ast.ShowTables:
		schema := x.DBName
		if schema == "" {
			schema = db
		}
		if !strings.EqualFold(schema, Name) {
			return plugins.Continue
		}
		filterColumn = "Tables_in_" + Name
		columns = []string{filterColumn}
		if x.Pattern != nil {
			// The backend names the column after the pattern too.
			columns[0] += " (" + patternText(x.Pattern) + ")"
		}
		filterColumn = columns[0]
		if x.Full {
			columns = append(columns, "Table_type")
		}
		for _, name := range s.names() {
			row := []any{name}
			if x.Full {
				row = append(row, virtualKind)
			}
			rows = append(rows, row)
		}
	case ast.ShowColumns:
		if x.Table == nil || !strings.EqualFold(showSchema(x, db), Name) {
			return plugins.Continue
		}
		t, ok := s.tables[x.Table.Name.L]
		if !ok {
			return refuse(mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", Name, x.Table.Name.O)))
		}
		filterColumn = "Field"
		columns, rows = columnsOf(t, x.Full)
		if x.Column != nil {
			rows = onlyColumn(rows, x.Column.Name.O)
		}
	default:
		if x.DBName != "" && strings.EqualFold(x.DBName, Name) || x.Table != nil && strings.EqualFold(showSchema(x, db), Name) {
			return refuse(notSupported("this SHOW statement (SHOW TABLES, SHOW COLUMNS and DESCRIBE are answered)"))
		}
		return plugins.Continue
	}
	if st.Command == plugins.ComStmtPrepare {
		return prepareAs(x, columns)
	}
	return s.answerShow(x, columns, rows, filterColumn, st)
}

// showSchema is the schema of the table a SHOW names.
func showSchema(x *ast.ShowStmt, db string) string {
	switch {
	case x.Table.Schema.O != "":
		return x.Table.Schema.O
	case x.DBName != "":
		return x.DBName
	}
	return db
}

// columnsOf is SHOW [FULL] COLUMNS of t.
func columnsOf(t table, full bool) ([]string, [][]any) {
	columns := []string{"Field", "Type", "Null", "Key", "Default", "Extra"}
	if full {
		columns = []string{"Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"}
	}
	var rows [][]any
	for _, c := range t.columns {
		typ, coll := varcharType, any(varcharColl)
		if t.numeric[c] {
			typ, coll = bigintType, nil
		}
		if full {
			rows = append(rows, []any{c, typ, coll, "YES", "", nil, "", "select", ""})
		} else {
			rows = append(rows, []any{c, typ, "YES", "", nil, ""})
		}
	}
	return columns, rows
}

// onlyColumn keeps the row of the named column (DESCRIBE t column).
func onlyColumn(rows [][]any, name string) [][]any {
	for _, r := range rows {
		if strings.EqualFold(r[0].(string), name) {
			return [][]any{r}
		}
	}
	return nil
}

// answerShow answers a SHOW from its table of rows, filtered by its LIKE
// (on filterColumn) or WHERE.
func (s *Schema) answerShow(x *ast.ShowStmt, columns []string, rows [][]any, filterColumn string, st *plugins.Statement) plugins.Action {
	snap := cache.NewVirtualSnapshot(Name, showTableName, columns, nil, rows)
	query := "SELECT * FROM " + Name + "." + showTableName
	switch {
	case x.Pattern != nil:
		not := ""
		if x.Pattern.Not {
			not = "NOT "
		}
		query += " WHERE " + mysqlwire.QuoteIdent(filterColumn) + " " + not + "LIKE " + patternLiteral(x.Pattern)
	case x.Where != nil:
		query += " WHERE " + restore(x.Where)
	}
	pd := plugins.Parse(query)
	defer pd.Release() // the tree is the parser's until then
	if pd.Err != nil || len(pd.Stmts) != 1 {
		return refuse(notSupported("this SHOW's filter"))
	}
	sel := pd.Stmts[0].(*ast.SelectStmt)
	// The filter names the SHOW's own columns.
	show := &Schema{tables: map[string]table{showTableName: {columns: columns}}}
	if e := show.checkColumns(sel); e != nil {
		return refuse(e)
	}
	lookup := func(id lease.TableID) *cache.Snapshot {
		if strings.EqualFold(id.Schema, Name) && id.Table == showTableName {
			return snap
		}
		return nil
	}
	resp, e := cache.SelectVirtual(sel, Name, lookup, st)
	if e != nil {
		return refuse(e)
	}
	return plugins.AnswerWith(resp)
}

// patternText is a LIKE pattern's text, as the backend prints it in the
// column name.
func patternText(p *ast.PatternLikeOrIlikeExpr) string {
	return strings.Trim(patternLiteral(p), "'")
}

// patternLiteral is a LIKE pattern as SQL.
func patternLiteral(p *ast.PatternLikeOrIlikeExpr) string { return restore(p.Pattern) }

func restore(n ast.Node) string {
	var b strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordUppercase|format.RestoreNameBackQuotes, &b)); err != nil {
		return ""
	}
	return b.String()
}
