package cache

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"tableproxy/plugins"
)

// The proxy's own state is visible as tables in the virtual schema
// "tableproxy", answered by the proxy and never sent to the backend.
const virtualSchema = "tableproxy"

// cachedTablesColumns are the columns of tableproxy.cached_tables.
var cachedTablesColumns = []string{"schema_name", "table_name", "state", "row_count", "memory_bytes", "version",
	"loaded_at", "load_ms", "hits", "pass_throughs", "invalidation", "error", "result_hits", "stale_reason"}

// cachedTablesNumeric marks its BIGINT columns.
var cachedTablesNumeric = map[string]bool{"row_count": true, "memory_bytes": true, "version": true,
	"load_ms": true, "hits": true, "pass_throughs": true, "result_hits": true}

// mentionsVirtualSchema is a cheap test, run on every SELECT, for whether a
// statement may read the virtual schema: an ASCII case-insensitive search
// for "tableproxy.", without allocating.
func mentionsVirtualSchema(sql string) bool {
	const want = virtualSchema + "."
	for i := 0; i+len(want) <= len(sql); i++ {
		if sql[i]|0x20 != 't' {
			continue
		}
		j := 0
		for ; j < len(want); j++ {
			c := sql[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != want[j] {
				break
			}
		}
		if j == len(want) {
			return true
		}
	}
	return false
}

// virtualQuery answers SELECT cols FROM tableproxy.cached_tables
// [WHERE col = value AND ...] from the cache's state.
func (p *Plugin) virtualQuery(st *plugins.Statement) (plugins.Action, bool) {
	if !mentionsVirtualSchema(st.SQL) {
		return plugins.Continue, false
	}
	pr := parsers.Get().(*parser.Parser)
	defer parsers.Put(pr) // the tree is the parser's until its next parse
	stmts, _, err := pr.ParseSQL(st.SQL)
	if err != nil || len(stmts) != 1 {
		return plugins.Continue, false
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok || sel.From == nil || sel.From.TableRefs == nil || sel.From.TableRefs.Right != nil {
		return plugins.Continue, false
	}
	src, ok := sel.From.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return plugins.Continue, false
	}
	tn, ok := src.Source.(*ast.TableName)
	if !ok || !strings.EqualFold(tn.Schema.O, virtualSchema) {
		return plugins.Continue, false
	}
	vt, ok := p.virtualTables()[strings.ToLower(tn.Name.O)]
	if !ok {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_NO_SUCH_TABLE,
			fmt.Sprintf("Table '%s.%s' doesn't exist", virtualSchema, tn.Name.O))), true
	}
	name := strings.ToLower(tn.Name.O)
	unsupported := plugins.RefuseWith(mysql.NewError(mysql.ER_NOT_SUPPORTED_YET,
		fmt.Sprintf("tableproxy.%s answers SELECT <columns or *> FROM tableproxy.%[1]s [WHERE column = value [AND ...]]", name)))
	cols, ok := projection(sel, vt.columns)
	if !ok || sel.GroupBy != nil || sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil {
		return unsupported, true
	}
	filters, ok := equalities(sel.Where, map[string]string{})
	if !ok {
		return unsupported, true
	}
	for name := range filters {
		if indexOf(vt.columns, name) < 0 {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_BAD_FIELD_ERROR, fmt.Sprintf("Unknown column '%s' in 'where clause'", name))), true
		}
	}
	for _, c := range cols {
		if indexOf(vt.columns, c) < 0 {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_BAD_FIELD_ERROR, fmt.Sprintf("Unknown column '%s' in 'field list'", c))), true
		}
	}
	var rows [][]any
	for _, full := range vt.rows(st) {
		if !matches(full, vt.columns, filters) {
			continue
		}
		row := make([]any, len(cols))
		for i, c := range cols {
			row[i] = full[indexOf(vt.columns, c)]
		}
		rows = append(rows, row)
	}
	binaryProto := st.Command == plugins.ComStmtExecute
	defs := make([]column, len(cols))
	for i, c := range cols {
		defs[i] = column{name: c, numeric: vt.numeric[c]}
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		return writeRows(w, virtualSchema, name, defs, rows, binaryProto)
	})), true
}

// virtualTable is one table of the virtual schema.
type virtualTable struct {
	columns []string
	numeric map[string]bool // BIGINT columns; the others are VARCHAR
	rows    func(st *plugins.Statement) [][]any
}

func (p *Plugin) virtualTables() map[string]virtualTable {
	m := map[string]virtualTable{
		"cached_tables": {columns: cachedTablesColumns, numeric: cachedTablesNumeric, rows: p.cachedTablesRows},
		// The session's last statement before this one, and whether and
		// why it was answered in memory (EXPLAIN LAST STATEMENT).
		"last_statement": {columns: lastStatementColumns, rows: func(st *plugins.Statement) [][]any {
			return [][]any{session(st).last.row()}
		}},
	}
	for name, vt := range p.virtual {
		m[name] = virtualTable{columns: vt.Columns(), numeric: vt.Numeric(), rows: func(*plugins.Statement) [][]any { return vt.Rows() }}
	}
	return m
}

func (p *Plugin) cachedTablesRows(*plugins.Statement) [][]any {
	var rows [][]any
	for _, t := range p.Tables() {
		rows = append(rows, []any{t.Schema, t.Table, t.State, int64(t.Rows), t.Bytes, int64(t.Version),
			formatTime(t), t.LoadDuration.Milliseconds(), int64(t.Hits), int64(t.Passes), t.Invalidation, t.Error,
			int64(t.ResultHits), t.StaleReason})
	}
	return rows
}

func formatTime(t Status) string {
	if t.LoadedAt.IsZero() {
		return ""
	}
	return t.LoadedAt.UTC().Format("2006-01-02 15:04:05.000000")
}

// projection returns the selected column names (all for *).
func projection(sel *ast.SelectStmt, all []string) ([]string, bool) {
	var cols []string
	for _, f := range sel.Fields.Fields {
		switch {
		case f.WildCard != nil:
			cols = append(cols, all...)
		case f.Expr != nil:
			c, ok := f.Expr.(*ast.ColumnNameExpr)
			if !ok || f.AsName.O != "" {
				return nil, false
			}
			cols = append(cols, c.Name.Name.L)
		}
	}
	return cols, len(cols) > 0
}

// equalities collects `column = literal` conditions joined by AND.
func equalities(e ast.ExprNode, out map[string]string) (map[string]string, bool) {
	if e == nil {
		return out, true
	}
	b, ok := e.(*ast.BinaryOperationExpr)
	if !ok {
		return nil, false
	}
	switch b.Op {
	case opcode.LogicAnd:
		if _, ok := equalities(b.L, out); !ok {
			return nil, false
		}
		return equalities(b.R, out)
	case opcode.EQ:
		c, ok := b.L.(*ast.ColumnNameExpr)
		v, ok2 := b.R.(*test_driver.ValueExpr)
		if !ok || !ok2 {
			return nil, false
		}
		out[c.Name.Name.L] = fmt.Sprint(v.GetValue())
		return out, true
	}
	return nil, false
}

func matches(row []any, columns []string, filters map[string]string) bool {
	for name, want := range filters {
		var got string
		switch v := row[indexOf(columns, name)].(type) {
		case string:
			got = v
		case int64:
			got = strconv.FormatInt(v, 10)
		default:
			got = fmt.Sprint(v)
		}
		// Names compare as the backend's identifiers do on Linux (exactly);
		// states and numbers compare as text.
		if got != want {
			return false
		}
	}
	return true
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
