package eval

import (
	"sort"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"tableproxy/lease"
	"tableproxy/plugins"
)

// A plan answers one SELECT from one table's snapshot. It is built from the
// statement's syntax tree against the snapshot's columns, and only for
// shapes whose answer the proxy can compute exactly as the backend would:
//
//	SELECT <*, or columns with optional aliases> FROM t [AS a]
//	  [WHERE <integer-column comparisons with integer literals or
//	          parameters: = <> < <= > >=, BETWEEN, IN, IS [NOT] NULL on
//	          any column, combined with AND, OR, NOT>]
//	  [ORDER BY <integer columns, including the primary key> [ASC|DESC], ...]
//	  [LIMIT n [OFFSET m]]
//
// Anything else (joins, expressions, functions, string comparisons,
// GROUP BY, DISTINCT, locking reads, subqueries) is not planned and goes to
// the backend. Rows come out in primary-key order (how InnoDB returns a
// scan or a primary-key range), or in ORDER BY order with primary-key order
// among equal keys.
type Plan struct {
	table   lease.TableID   // the (first) table
	Tables  []lease.TableID // every table, in FROM order
	Join    *joinSpec       // for a join of two tables
	Cols    []int           // projected snapshot columns
	Aggs    []agg           // or: aggregates over the matching rows (one result row)
	where   expr            // nil: every row
	order   []orderKey
	limit   operand // count; limit.kind == opNone for no LIMIT
	offset  operand
	NParams int
	// strParams[i]: parameter i is compared with a string column (else
	// it is an integer). An argument of the other kind is compared by
	// other rules (as numbers), so such an execution goes to the backend.
	strParams []bool
	// total: the ORDER BY includes the primary key, so no two rows tie.
	// Without it, rows that tie send the statement to the backend.
	total bool
	// distinct: SELECT DISTINCT, planned only with an ORDER BY of exactly
	// the projected columns.
	distinct bool
	// groupBy are the GROUP BY columns (nil: no GROUP BY), planned only
	// with an ORDER BY of exactly those columns; items are the select
	// list in order.
	groupBy []int
	Items   []item
	// Computed: the select list has arithmetic, so rows are computed
	// rather than copied.
	Computed bool
	// NamesFromText: an item of the select list is an expression without
	// an alias, so the backend names its column after the text as typed
	// (spaces and literals included), which the template does not keep.
	NamesFromText bool
	// ParamsShown: an item of the select list has a parameter of a
	// prepared statement, whose type decides the column's definition.
	ParamsShown bool
	// whereArith is the arithmetic in the WHERE clause. The backend may
	// evaluate it on rows the proxy skips (its access paths are its own),
	// and an overflow there is an error; so the proxy answers only when it
	// overflows on no row of the table.
	whereArith []operand
}

// item is one select-list entry: a column (col >= 0), aggregate agg
// (agg >= 0), or integer arithmetic (expr). name is its column's name in
// the result, for results whose metadata the proxy composes (the virtual
// schema's).
type item struct {
	Col, Agg int
	Expr     *operand
	Name     string
}

// agg is COUNT(*), COUNT(col), SUM(col), MIN(col) or MAX(col) over an
// integer column (col is -1 for COUNT(*)).
type agg struct {
	Fn  string
	Col int
}

type orderKey struct {
	col  int
	desc bool
}

// expr is a WHERE condition in three-valued logic.
type expr interface {
	eval(r *RowCtx) tri
}

type tri int8

const (
	triFalse tri = iota
	triTrue
	triNull
)

func triNot(t tri) tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triNull
}

// operand is a column, an integer literal or a parameter.
type operand struct {
	kind     opKind
	col      int
	val      num
	param    int
	negate   bool // for parameters: -?
	unsigned bool // for columns: UNSIGNED
	str      []byte
	arith    opcode.Op // for opArith: Plus, Minus, Mul, or UnaryMinus
	args     []operand // for opArith
}

// hasParam reports whether o is or contains a parameter.
func (o *operand) hasParam() bool {
	if o.kind == opParam {
		return true
	}
	for i := range o.args {
		if o.args[i].hasParam() {
			return true
		}
	}
	return false
}

type opKind uint8

const (
	opNone opKind = iota
	opColumn
	opLiteral
	opParam
	opString // a string literal
	opArith  // integer arithmetic: args[0] op args[1], or -args[0]
)

// constant reports whether o's value is the same for every row.
func (o operand) constant() bool {
	return o.kind == opLiteral || o.kind == opParam || o.kind == opString
}

type cmpExpr struct {
	op   opcode.Op
	l, r operand
}

type andExpr struct{ l, r expr }
type orExpr struct{ l, r expr }
type notExpr struct{ e expr }
type isNullExpr struct {
	col int
	not bool
}
type inExpr struct {
	x    operand
	list []operand
	not  bool
}
type betweenExpr struct {
	x, lo, hi operand
	not       bool
}

// String conditions: a string column compared, by its collation, with a
// string literal or parameter.
type strCmpExpr struct {
	op  opcode.Op // column op value
	col int
	val operand
}
type strColsExpr struct {
	op   opcode.Op // l op r
	l, r int
}
type strInExpr struct {
	col  int
	list []operand
	not  bool
}
type strBetweenExpr struct {
	col    int
	lo, hi operand
	not    bool
}
type likeExpr struct {
	col int
	pat operand
	not bool
}

// tableRef is a table of the FROM clause: its alias (or name) and its
// columns' place in the snapshot the plan is built against (for a join,
// the two tables' columns side by side).
type tableRef struct {
	alias, schema string
	off, n        int
}

// planner builds a plan for one statement against one snapshot.
type planner struct {
	snap      *Snapshot
	tables    []tableRef
	nparams   int
	order     map[int]int // parameter marker offset in the text -> parameter number
	strParams map[int]bool
	failed    ast.ExprNode // the condition that could not be planned
	ariths    []operand    // arithmetic planned so far
}

// restore prints a syntax tree node back as SQL, for explanations.
func restore(n ast.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordUppercase|format.RestoreNameBackQuotes, &b)); err != nil {
		return "(an expression)"
	}
	return b.String()
}

// paramOrder numbers a statement's '?' markers in text order, which is the
// order the client binds them in (the parser leaves ParamMarkerExpr.Order
// unset; TiDB numbers them in its planner).
type paramOrder struct{ offsets []int }

func (v *paramOrder) Enter(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		v.offsets = append(v.offsets, m.Offset)
	}
	return n, false
}

func (v *paramOrder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// tableID names t, unqualified in db (see plugins.TableOf).
func tableID(t *ast.TableName, db string) lease.TableID { return lease.TableID(plugins.TableOf(t, db)) }

// BuildPlan returns a plan for sel, or nil and why the shape is not
// covered. It plans in steps, each of which may decline: the statement's
// shape, its tables, the select list, GROUP BY, WHERE and ON (and the
// join), ORDER BY (and what depends on it), then LIMIT and parameters.
func BuildPlan(sel *ast.SelectStmt, db string, lookup func(lease.TableID) *Snapshot) (*Plan, *Snapshot, Why) {
	if why := plainSelect(sel); why.Declined() {
		return nil, nil, why
	}
	from, why := resolveFrom(sel.From.TableRefs, db, lookup)
	if why.Declined() {
		return nil, nil, why
	}
	snap := from.snaps[0]
	if len(from.snaps) == 2 {
		snap = JoinSnapshot(from.snaps[0], from.snaps[1], nil)
	}
	po := &paramOrder{}
	sel.Accept(po)
	sort.Ints(po.offsets)
	pl := &planner{snap: snap, tables: from.refs, order: map[int]int{}, strParams: map[int]bool{}}
	for i, off := range po.offsets {
		pl.order[off] = i
	}
	p := &Plan{table: from.ids[0], Tables: from.ids}
	if why := pl.selectList(p, sel.Fields.Fields); why.Declined() {
		return nil, nil, why
	}
	if why := pl.grouping(p, sel); why.Declined() {
		return nil, nil, why
	}
	if why := pl.filters(p, sel, from); why.Declined() {
		return nil, nil, why
	}
	if why := pl.ordering(p, sel); why.Declined() {
		return nil, nil, why
	}
	if why := pl.limits(p, sel.Limit); why.Declined() {
		return nil, nil, why
	}
	// Every marker of the statement must have been planned (one in an
	// unplanned place would shift the numbering of the others).
	if pl.nparams != len(po.offsets) {
		return nil, nil, Because(UnsupportedExpression, "a parameter marker is in a place the evaluator does not cover")
	}
	p.NParams = pl.nparams
	p.strParams = make([]bool, pl.nparams)
	for i := range p.strParams {
		p.strParams[i] = pl.strParams[i]
	}
	return p, snap, Why{}
}

// plainSelect declines the clauses the evaluator leaves to the backend.
func plainSelect(sel *ast.SelectStmt) Why {
	if sel.GroupBy != nil && (sel.GroupBy.Rollup || sel.Distinct) || sel.Having != nil || sel.WindowSpecs != nil || sel.LockInfo != nil ||
		sel.SelectIntoOpt != nil || sel.With != nil || sel.Kind != ast.SelectStmtKindSelect || sel.IsInBraces ||
		len(sel.TableHints) > 0 || sel.From == nil || sel.From.TableRefs == nil {
		return Because(NotPlainSelect, "only a plain SELECT, without HAVING, WITH ROLLUP, window, locking clause, INTO, WITH or hints, is answered in memory")
	}
	if sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows {
		// FOUND_ROWS() would then count the rows without the LIMIT.
		return Because(CalcFoundRows, "SQL_CALC_FOUND_ROWS: the backend counts the rows for FOUND_ROWS()")
	}
	return Why{}
}

// fromTables are the tables a SELECT reads, in FROM order, and its join.
type fromTables struct {
	ids   []lease.TableID
	snaps []*Snapshot
	refs  []tableRef
	on    ast.ExprNode // the join's ON condition (nil: none)
	left  bool         // a LEFT JOIN
}

// resolveFrom finds the snapshots of FROM t [AS a], or of an inner or
// left join of two tables: t1 [AS a] [INNER | CROSS | LEFT] JOIN t2 [AS
// b] [ON ...].
func resolveFrom(from *ast.Join, db string, lookup func(lease.TableID) *Snapshot) (fromTables, Why) {
	var f fromTables
	sources := []ast.ResultSetNode{from.Left}
	if from.Right != nil {
		if from.Tp != ast.CrossJoin && from.Tp != ast.LeftJoin || from.NaturalJoin || from.StraightJoin || from.Using != nil {
			return f, Because(UnsupportedJoin, "only inner and left joins are answered in memory (not RIGHT, NATURAL, STRAIGHT_JOIN or USING)")
		}
		f.left = from.Tp == ast.LeftJoin
		sources = append(sources, from.Right)
		if from.On != nil {
			f.on = from.On.Expr
		}
	}
	for _, src := range sources {
		ts, ok := src.(*ast.TableSource)
		if !ok {
			return f, Because(UnsupportedJoin, "only joins of two tables are answered in memory (no derived tables or longer joins)")
		}
		tn, ok := ts.Source.(*ast.TableName)
		if !ok {
			return f, Because(UnsupportedJoin, "only tables are answered in memory (no derived tables or subqueries)")
		}
		if len(tn.IndexHints) > 0 || len(tn.PartitionNames) > 0 || tn.AsOf != nil || tn.TableSample != nil {
			return f, Because(NotPlainSelect, "index hints, partitions, AS OF and TABLESAMPLE are left to the backend")
		}
		id := tableID(tn, db)
		snap := lookup(id)
		if snap == nil {
			return f, Because(TableNotCached, "a table it reads is not cached")
		}
		ref := tableRef{alias: tn.Name.L, schema: tn.Schema.L}
		if ts.AsName.L != "" {
			ref.alias, ref.schema = ts.AsName.L, ""
		}
		if len(f.refs) > 0 {
			ref.off = f.refs[0].n
		}
		ref.n = len(snap.Fields)
		f.ids, f.snaps, f.refs = append(f.ids, id), append(f.snaps, snap), append(f.refs, ref)
	}
	if len(f.snaps) == 2 && f.refs[0].alias == f.refs[1].alias {
		return f, Because(UnsupportedJoin, "both tables of the join have the same name")
	}
	return f, Why{}
}

// selectList plans the select list: columns (and *), aggregates, and
// integer arithmetic.
func (pl *planner) selectList(p *Plan, fields []*ast.SelectField) Why {
	for _, f := range fields {
		switch {
		case f.WildCard != nil:
			lo, hi := 0, len(pl.snap.Fields)
			if f.WildCard.Table.L != "" {
				t := pl.table(f.WildCard.Schema.L, f.WildCard.Table.L)
				if t == nil {
					return Because(UnsupportedExpression, "* of an unknown table")
				}
				lo, hi = t.off, t.off+t.n
			} else if f.WildCard.Schema.L != "" {
				return Because(UnsupportedExpression, "db.* is not covered")
			}
			for i := lo; i < hi; i++ {
				p.Cols = append(p.Cols, i)
				p.Items = append(p.Items, item{Col: i, Agg: -1, Name: string(pl.snap.Fields[i].OrgName)})
			}
		default:
			name := f.AsName.O
			if name == "" {
				name = f.Text()
				if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
					name = c.Name.Name.O
				}
			}
			name = strings.Clone(name) // (the plan outlives the statement's text)
			if _, col := f.Expr.(*ast.ColumnNameExpr); !col && f.AsName.L == "" {
				p.NamesFromText = true
			}
			if a, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
				g, ok := pl.aggregate(a)
				if !ok {
					return Because(UnsupportedAggregate, "aggregate "+restore(a)+" is not covered (COUNT, SUM, AVG, MIN, MAX of an integer column)")
				}
				p.Aggs = append(p.Aggs, g)
				p.Items = append(p.Items, item{Col: -1, Agg: len(p.Aggs) - 1, Name: name})
				continue
			}
			c, ok := f.Expr.(*ast.ColumnNameExpr)
			if !ok {
				if o, ok := pl.operand(f.Expr); ok && o.kind == opArith {
					p.Items = append(p.Items, item{Col: -1, Agg: -1, Expr: &o, Name: name})
					p.Computed = true
					p.ParamsShown = p.ParamsShown || o.hasParam()
					continue
				}
				return Because(UnsupportedExpression, "select expression "+restore(f.Expr)+" is not covered (columns, integer arithmetic and aggregates only)")
			}
			i := pl.column(c)
			if i < 0 {
				return Because(UnsupportedExpression, "unknown column in "+restore(f.Expr))
			}
			p.Cols = append(p.Cols, i)
			p.Items = append(p.Items, item{Col: i, Agg: -1, Name: name})
		}
	}
	return Why{}
}

// grouping plans GROUP BY, and declines what an aggregate or a group
// would leave to the backend's choice.
func (pl *planner) grouping(p *Plan, sel *ast.SelectStmt) Why {
	if sel.GroupBy != nil {
		for _, by := range sel.GroupBy.Items {
			c, ok := by.Expr.(*ast.ColumnNameExpr)
			i := -1
			if ok {
				i = pl.column(c)
			}
			if i < 0 || !isInteger(pl.snap.Fields[i]) && !pl.isString(i) {
				return Because(UnsupportedAggregate, "GROUP BY "+restore(by.Expr)+" is not covered (integer or string columns only)")
			}
			p.groupBy = append(p.groupBy, i)
		}
		for _, c := range p.Cols {
			if indexOfInt(p.groupBy, c) < 0 {
				return Because(UnsupportedAggregate, "a selected column is not in the GROUP BY: its value is the backend's choice")
			}
		}
	}
	if p.Computed && (len(p.Aggs) > 0 || p.groupBy != nil || sel.Distinct) {
		return Because(UnsupportedAggregate, "arithmetic beside aggregates, GROUP BY or DISTINCT is left to the backend")
	}
	if len(p.Aggs) > 0 && p.groupBy == nil && (len(p.Cols) > 0 || sel.OrderBy != nil) {
		// Columns beside aggregates without GROUP BY take the value of an
		// arbitrary row: left to the backend.
		return Because(UnsupportedAggregate, "columns beside aggregates without GROUP BY are left to the backend")
	}
	return Why{}
}

// filters plans WHERE and ON, and the join of two tables.
func (pl *planner) filters(p *Plan, sel *ast.SelectStmt, from fromTables) Why {
	if sel.Where != nil {
		pl.ariths = nil
		if p.where = pl.cond(sel.Where); p.where == nil {
			return Because(UnsupportedExpression, "WHERE "+restore(pl.failed)+" is not covered")
		}
		p.whereArith = pl.ariths
	}
	var onCond expr
	if from.on != nil {
		pl.ariths = nil
		if onCond = pl.cond(from.on); onCond == nil {
			return Because(UnsupportedExpression, "ON "+restore(pl.failed)+" is not covered")
		}
		if len(pl.ariths) > 0 {
			return Because(UnsupportedJoin, "arithmetic in ON is left to the backend")
		}
	}
	if len(from.snaps) == 2 {
		if len(p.whereArith) > 0 {
			return Because(UnsupportedJoin, "arithmetic in the WHERE of a join is left to the backend")
		}
		if sel.OrderBy == nil && len(p.Aggs) == 0 && !(from.snaps[0].AnyOrder && from.snaps[1].AnyOrder) {
			return Because(UnsupportedOrder, "a join without ORDER BY: the order of its rows is the backend's choice")
		}
		switch {
		case from.left:
			// A LEFT JOIN's ON picks the matching rows of the second table;
			// a row of the first that has none is joined to NULLs. WHERE
			// applies to the joined rows.
			if onCond == nil {
				return Because(UnsupportedJoin, "a LEFT JOIN without ON")
			}
			p.Join = &joinSpec{left: true, on: onCond, eq: equiJoin(onCond, from.refs[1].off)}
		default:
			// An inner join's ON is one more condition on the joined rows.
			if onCond != nil {
				if p.where == nil {
					p.where = onCond
				} else {
					p.where = andExpr{onCond, p.where}
				}
			}
			p.Join = &joinSpec{eq: equiJoin(p.where, from.refs[1].off)}
		}
	}
	return Why{}
}

// ordering plans ORDER BY, and what needs one: GROUP BY and DISTINCT.
func (pl *planner) ordering(p *Plan, sel *ast.SelectStmt) Why {
	if sel.OrderBy != nil {
		for _, by := range sel.OrderBy.Items {
			c, ok := by.Expr.(*ast.ColumnNameExpr)
			if !ok {
				return Because(UnsupportedOrder, "ORDER BY "+restore(by.Expr)+" is not covered (integer or string columns only)")
			}
			// An unqualified name in ORDER BY means a select-list alias
			// before it means a column of the tables.
			if c.Name.Table.L == "" {
				if c, ok = aliasedColumn(sel.Fields.Fields, c); !ok {
					return Because(UnsupportedOrder, "ORDER BY "+restore(by.Expr)+" names an alias of an expression")
				}
			}
			i := pl.column(c)
			if i < 0 || !isInteger(pl.snap.Fields[i]) && !pl.isString(i) {
				return Because(UnsupportedOrder, "ORDER BY "+restore(by.Expr)+" is not covered (integer or string columns only)")
			}
			p.order = append(p.order, orderKey{col: i, desc: by.Desc})
		}
		// Rows with equal sort keys come back from the backend in an order
		// of its own making (a filesort or priority queue); an order that
		// includes the primary key is total. Others are checked for ties
		// when they run.
		p.total = true
		for _, pk := range pl.snap.PK {
			has := false
			for _, o := range p.order {
				has = has || o.col == pk
			}
			p.total = p.total && has
		}
	}
	if p.groupBy != nil {
		// Groups come in the order of an ORDER BY of exactly the GROUP BY
		// columns. (MariaDB sorts groups even without one, MySQL 8 does
		// not: without an ORDER BY, the order is left to the backend.)
		order := make([]int, len(p.order))
		for i, o := range p.order {
			order[i] = o.col
		}
		if !sameSet(p.groupBy, order) {
			return Because(UnsupportedOrder, "GROUP BY is answered only with an ORDER BY of exactly its columns")
		}
	}
	if sel.Distinct {
		// Which of several equal rows DISTINCT keeps, and in what order
		// the survivors come, is the backend's choice unless an ORDER BY
		// sorts by every projected column (and nothing else).
		if len(p.Aggs) > 0 || !sameColumns(p.Cols, p.order) {
			return Because(UnsupportedOrder, "DISTINCT is answered only with an ORDER BY of exactly its columns")
		}
		p.distinct = true
	}
	return Why{}
}

// limits plans LIMIT and OFFSET.
func (pl *planner) limits(p *Plan, limit *ast.Limit) Why {
	if limit != nil {
		if p.limit = pl.value(limit.Count); p.limit.kind == opNone {
			return Because(UnsupportedExpression, "LIMIT "+restore(limit.Count)+" is not covered")
		}
		if limit.Offset != nil {
			if p.offset = pl.value(limit.Offset); p.offset.kind == opNone {
				return Because(UnsupportedExpression, "OFFSET "+restore(limit.Offset)+" is not covered")
			}
		}
	}
	return Why{}
}

// ArgsMatch reports whether each argument is of the kind the plan
// compares it as (NULL fits both).
func (p *Plan) ArgsMatch(args []Arg) bool {
	for i, a := range args {
		if !a.Null && a.Str != p.strParams[i] {
			return false
		}
	}
	return true
}

// sameSet reports whether a and b hold the same values.
func sameSet(a, b []int) bool {
	for _, x := range a {
		if indexOfInt(b, x) < 0 {
			return false
		}
	}
	for _, x := range b {
		if indexOfInt(a, x) < 0 {
			return false
		}
	}
	return len(a) > 0
}

func indexOfInt(list []int, v int) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

// sameColumns reports whether the ORDER BY keys are exactly the projected
// columns, in any order.
func sameColumns(cols []int, order []orderKey) bool {
	if len(order) == 0 {
		return false
	}
	for _, c := range cols {
		found := false
		for _, o := range order {
			found = found || o.col == c
		}
		if !found {
			return false
		}
	}
	for _, o := range order {
		found := false
		for _, c := range cols {
			found = found || o.col == c
		}
		if !found {
			return false
		}
	}
	return true
}

// isString reports whether column i is a string column compared in-proxy.
func (pl *planner) isString(i int) bool {
	return pl.snap.Colls != nil && pl.snap.Colls[i] != nil
}

// strColumn resolves e to a string column compared in-proxy, or -1.
func (pl *planner) strColumn(e ast.ExprNode) int {
	if p, ok := e.(*ast.ParenthesesExpr); ok {
		return pl.strColumn(p.Expr)
	}
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		return -1
	}
	if i := pl.column(c); i >= 0 && pl.isString(i) {
		return i
	}
	return -1
}

// strValue is a string literal (in the connection's character set: no
// introducer, no N”) or a parameter bound to a string.
func (pl *planner) strValue(e ast.ExprNode) operand {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return pl.strValue(x.Expr)
	case *test_driver.ParamMarkerExpr:
		n := pl.order[x.Offset]
		pl.nparams++
		pl.strParams[n] = true
		return operand{kind: opParam, param: n}
	case *test_driver.ValueExpr:
		if x.Kind() == test_driver.KindString && x.Type.GetCharset() == "utf8mb4" && x.Type.GetCollate() == "utf8mb4_bin" {
			return operand{kind: opString, str: []byte(x.GetString())}
		}
	}
	return operand{}
}

// strCond plans a condition on a string column, or returns nil.
func (pl *planner) strCond(e ast.ExprNode) expr {
	switch x := e.(type) {
	case *ast.BinaryOperationExpr:
		col, other, op := pl.strColumn(x.L), x.R, x.Op
		if col < 0 {
			col, other, op = pl.strColumn(x.R), x.L, flip(x.Op)
		}
		if col < 0 {
			return nil
		}
		if c2 := pl.strColumn(other); c2 >= 0 {
			// Two columns of one collation compare by it; of two, by
			// coercion rules left to the backend.
			if pl.snap.Colls[c2] != pl.snap.Colls[col] {
				return nil
			}
			return strColsExpr{op: op, l: col, r: c2}
		}
		v := pl.strValue(other)
		if v.kind == opNone {
			return nil
		}
		return strCmpExpr{op: op, col: col, val: v}
	case *ast.PatternInExpr:
		col := pl.strColumn(x.Expr)
		if col < 0 || x.Sel != nil {
			return nil
		}
		in := strInExpr{col: col, not: x.Not}
		for _, item := range x.List {
			v := pl.strValue(item)
			if v.kind == opNone {
				return nil
			}
			in.list = append(in.list, v)
		}
		return in
	case *ast.BetweenExpr:
		col := pl.strColumn(x.Expr)
		if col < 0 {
			return nil
		}
		lo, hi := pl.strValue(x.Left), pl.strValue(x.Right)
		if lo.kind == opNone || hi.kind == opNone {
			return nil
		}
		return strBetweenExpr{col: col, lo: lo, hi: hi, not: x.Not}
	case *ast.PatternLikeOrIlikeExpr:
		// Only LIKE with the default escape character, whose patterns are
		// checked to contain no backslash (so that escaping, which
		// NO_BACKSLASH_ESCAPES changes, never matters).
		col := pl.strColumn(x.Expr)
		if col < 0 || !x.IsLike || x.Escape != '\\' {
			return nil
		}
		v := pl.strValue(x.Pattern)
		if v.kind == opNone {
			return nil
		}
		return likeExpr{col: col, pat: v, not: x.Not}
	}
	return nil
}

// aggregate plans COUNT(*), or COUNT, SUM, MIN or MAX of an integer column.
func (pl *planner) aggregate(a *ast.AggregateFuncExpr) (agg, bool) {
	fn := strings.ToLower(a.F)
	if a.Distinct || a.Order != nil || len(a.Args) != 1 {
		return agg{}, false
	}
	switch fn {
	case ast.AggFuncCount, ast.AggFuncSum, ast.AggFuncMin, ast.AggFuncMax, ast.AggFuncAvg:
	default:
		return agg{}, false
	}
	if v, ok := a.Args[0].(*test_driver.ValueExpr); ok && fn == ast.AggFuncCount {
		// COUNT(*) (parsed as COUNT(1)) counts rows.
		if k := v.Kind(); k == test_driver.KindInt64 || k == test_driver.KindUint64 {
			return agg{Fn: fn, Col: -1}, true
		}
		return agg{}, false
	}
	c, ok := a.Args[0].(*ast.ColumnNameExpr)
	if !ok {
		return agg{}, false
	}
	i := pl.column(c)
	if i < 0 || !isInteger(pl.snap.Fields[i]) {
		return agg{}, false
	}
	if (fn == ast.AggFuncMin || fn == ast.AggFuncMax) && pl.snap.Fields[i].Flag&mysql.ZEROFILL_FLAG != 0 {
		// MariaDB pads a ZEROFILL column's MIN or MAX with zeros in a
		// GROUP BY, and not without one (where it reads the value from
		// the index): the stored, padded value is not always its answer.
		return agg{}, false
	}
	return agg{Fn: fn, Col: i}, true
}

// column resolves a column reference to a snapshot column, or -1 (also
// when an unqualified name is in both tables of a join: ambiguous).
func (pl *planner) column(c *ast.ColumnNameExpr) int {
	n := c.Name
	lo, hi := 0, len(pl.snap.Fields)
	if n.Table.L != "" {
		t := pl.table(n.Schema.L, n.Table.L)
		if t == nil {
			return -1
		}
		lo, hi = t.off, t.off+t.n
	} else if n.Schema.L != "" {
		return -1
	}
	found := -1
	for i := lo; i < hi; i++ {
		// Column names are case-insensitive.
		if strings.EqualFold(string(pl.snap.Fields[i].OrgName), n.Name.O) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

// aliasedColumn resolves an unqualified ORDER BY name against the select
// list's aliases: the column an alias stands for, c itself when no alias
// has its name, and ok=false when it names anything but one column.
func aliasedColumn(fields []*ast.SelectField, c *ast.ColumnNameExpr) (*ast.ColumnNameExpr, bool) {
	var found *ast.ColumnNameExpr
	named := false // a column of the select list without alias has the name
	for _, f := range fields {
		if f.AsName.L == "" {
			col, ok := f.Expr.(*ast.ColumnNameExpr)
			named = named || ok && col.Name.Name.L == c.Name.Name.L
			continue
		}
		if f.AsName.L != c.Name.Name.L {
			continue
		}
		col, ok := f.Expr.(*ast.ColumnNameExpr)
		if !ok || found != nil {
			return nil, false
		}
		found = col
	}
	switch {
	case found == nil:
		return c, true
	case named:
		return nil, false // which one the backend picks is its business
	}
	return found, true
}

// table finds a table of the FROM clause by its alias (or name, with an
// optional schema when it has no alias).
func (pl *planner) table(schema, name string) *tableRef {
	for i := range pl.tables {
		t := &pl.tables[i]
		if t.alias == name && (schema == "" || schema == t.schema) {
			return t
		}
	}
	return nil
}

// operand turns an expression into an integer column, literal or
// parameter, or reports false.
func (pl *planner) operand(e ast.ExprNode) (operand, bool) {
	switch x := e.(type) {
	case *ast.ColumnNameExpr:
		i := pl.column(x)
		if i < 0 || !isInteger(pl.snap.Fields[i]) {
			return operand{}, false
		}
		return operand{kind: opColumn, col: i, unsigned: pl.snap.Fields[i].Flag&mysql.UNSIGNED_FLAG != 0}, true
	case *ast.ParenthesesExpr:
		return pl.operand(x.Expr)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.Plus, opcode.Minus, opcode.Mul:
			l, okl := pl.operand(x.L)
			r, okr := pl.operand(x.R)
			if !okl || !okr {
				return operand{}, false
			}
			o := operand{kind: opArith, arith: x.Op, args: []operand{l, r}}
			pl.ariths = append(pl.ariths, o)
			return o, true
		}
		return operand{}, false
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Minus {
			if _, isCol := unparen(x.V).(*ast.ColumnNameExpr); isCol {
				a, ok := pl.operand(x.V)
				if !ok {
					return operand{}, false
				}
				o := operand{kind: opArith, arith: opcode.Minus, args: []operand{a}}
				pl.ariths = append(pl.ariths, o)
				return o, true
			}
			if _, isArith := unparen(x.V).(*ast.BinaryOperationExpr); isArith {
				a, ok := pl.operand(x.V)
				if !ok {
					return operand{}, false
				}
				o := operand{kind: opArith, arith: opcode.Minus, args: []operand{a}}
				pl.ariths = append(pl.ariths, o)
				return o, true
			}
		}
	}
	v := pl.value(e)
	return v, v.kind != opNone
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// value is an integer literal or a parameter.
func (pl *planner) value(e ast.ExprNode) operand {
	switch x := e.(type) {
	case *test_driver.ParamMarkerExpr:
		pl.nparams++
		return operand{kind: opParam, param: pl.order[x.Offset]}
	case *test_driver.ValueExpr:
		switch x.Kind() {
		case test_driver.KindInt64:
			return operand{kind: opLiteral, val: SignedNum(x.GetInt64())}
		case test_driver.KindUint64:
			return operand{kind: opLiteral, val: unsignedNum(x.GetUint64())}
		}
	case *ast.UnaryOperationExpr:
		// -5 is parsed as minus applied to 5 (and a template's -5 as -?).
		if x.Op == opcode.Minus {
			if v := pl.value(x.V); v.kind == opLiteral {
				v.val = v.val.negated()
				return v
			} else if v.kind == opParam && !v.negate {
				v.negate = true
				return v
			}
		}
	}
	return operand{}
}

// cond builds a condition, or nil if it is not covered (and pl.failed is
// the innermost part that is not).
func (pl *planner) cond(e ast.ExprNode) expr {
	c := pl.cond1(e)
	if c == nil && pl.failed == nil {
		pl.failed = e
	}
	return c
}

func (pl *planner) cond1(e ast.ExprNode) expr {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return pl.cond(x.Expr)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, r := pl.cond(x.L), pl.cond(x.R)
			if l == nil || r == nil {
				return nil
			}
			if x.Op == opcode.LogicAnd {
				return andExpr{l, r}
			}
			return orExpr{l, r}
		case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
			if pl.strColumn(x.L) >= 0 || pl.strColumn(x.R) >= 0 {
				return pl.strCond(x)
			}
			l, okl := pl.operand(x.L)
			r, okr := pl.operand(x.R)
			// At least one side must be a column: comparing two constants is
			// fine but rare, and left to the backend.
			if !okl || !okr || (l.constant() && r.constant()) {
				return nil
			}
			return cmpExpr{op: x.Op, l: l, r: r}
		}
	case *ast.UnaryOperationExpr:
		if x.Op == opcode.Not {
			if c := pl.cond(x.V); c != nil {
				return notExpr{c}
			}
		}
	case *ast.IsNullExpr:
		c, ok := x.Expr.(*ast.ColumnNameExpr)
		if !ok {
			return nil
		}
		i := pl.column(c)
		if i < 0 {
			return nil
		}
		return isNullExpr{col: i, not: x.Not}
	case *ast.PatternLikeOrIlikeExpr:
		return pl.strCond(x)
	case *ast.PatternInExpr:
		if pl.strColumn(x.Expr) >= 0 {
			return pl.strCond(x)
		}
		if x.Sel != nil {
			return nil
		}
		v, ok := pl.operand(x.Expr)
		if !ok || v.kind != opColumn {
			return nil
		}
		in := inExpr{x: v, not: x.Not}
		for _, item := range x.List {
			o := pl.value(item)
			if o.kind == opNone {
				return nil
			}
			in.list = append(in.list, o)
		}
		return in
	case *ast.BetweenExpr:
		if pl.strColumn(x.Expr) >= 0 {
			return pl.strCond(x)
		}
		v, ok := pl.operand(x.Expr)
		lo, okl := pl.operand(x.Left)
		hi, okh := pl.operand(x.Right)
		if !ok || !okl || !okh || v.kind != opColumn || !lo.constant() || !hi.constant() {
			return nil
		}
		return betweenExpr{x: v, lo: lo, hi: hi, not: x.Not}
	}
	return nil
}

func isInteger(f *mysql.Field) bool {
	switch f.Type {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		return true
	}
	return false
}

// num is an integer of either signedness.
type num struct {
	neg bool   // negative (then mag is the magnitude)
	mag uint64 // absolute value
}

func SignedNum(v int64) num {
	if v < 0 {
		return num{neg: true, mag: uint64(-(v + 1)) + 1}
	}
	return num{mag: uint64(v)}
}

func unsignedNum(v uint64) num { return num{mag: v} }

func (a num) negated() num {
	if a.mag != 0 {
		a.neg = !a.neg
	}
	return a
}

// cmp compares two integers exactly, whatever their signedness.
func (a num) Cmp(b num) int {
	switch {
	case a.neg && !b.neg:
		return -1
	case !a.neg && b.neg:
		return 1
	}
	c := 0
	switch {
	case a.mag < b.mag:
		c = -1
	case a.mag > b.mag:
		c = 1
	}
	if a.neg {
		c = -c
	}
	return c
}
