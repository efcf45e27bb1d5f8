package vschema

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// source is a table of a SELECT's FROM: the name it is referred to by
// (its alias, or its name) and its columns.
type source struct {
	name    string
	columns []string
}

// checkColumns finds a column sel names that none of its tables has: the
// backend's 1054, naming the clause, as it words it.
func (s *Schema) checkColumns(sel *ast.SelectStmt) *mysql.MyError {
	var from []source
	if sel.From != nil {
		from = s.sources(sel.From.TableRefs, from)
	}
	aliases := map[string]bool{}
	var fields []ast.Node
	for _, f := range sel.Fields.Fields {
		if f.AsName.L != "" {
			aliases[f.AsName.L] = true
		}
		if f.Expr != nil {
			fields = append(fields, f.Expr)
		}
	}
	clauses := []clause{
		{"field list", fields, false},
		{"on clause", onClauses(sel), false},
		{"where clause", nodes(sel.Where), false},
	}
	if sel.GroupBy != nil {
		var by []ast.Node
		for _, it := range sel.GroupBy.Items {
			by = append(by, it.Expr)
		}
		clauses = append(clauses, clause{"group statement", by, true})
	}
	if sel.Having != nil {
		clauses = append(clauses, clause{"having clause", nodes(sel.Having.Expr), true})
	}
	if sel.OrderBy != nil {
		var by []ast.Node
		for _, it := range sel.OrderBy.Items {
			by = append(by, it.Expr)
		}
		clauses = append(clauses, clause{"order clause", by, true})
	}
	for _, c := range clauses {
		for _, n := range c.nodes {
			v := &columnNames{}
			n.Accept(v)
			for _, col := range v.names {
				if known(col, from) || c.aliases && col.Table.L == "" && aliases[col.Name.L] {
					continue
				}
				name := col.Name.O
				if col.Table.O != "" {
					name = col.Table.O + "." + name
				}
				return mysql.NewError(mysql.ER_BAD_FIELD_ERROR, fmt.Sprintf("Unknown column '%s' in '%s'", name, c.name))
			}
		}
	}
	return nil
}

// clause is a part of a SELECT, as 1054 names it, and its expressions.
type clause struct {
	name    string
	nodes   []ast.Node
	aliases bool // select-list aliases may be named
}

// known reports whether one of the tables has the column.
func known(col *ast.ColumnName, from []source) bool {
	for _, t := range from {
		if col.Table.L != "" && col.Table.L != t.name {
			continue
		}
		for _, c := range t.columns {
			if strings.EqualFold(c, col.Name.O) {
				return true
			}
		}
	}
	return false
}

// sources lists the tables of a FROM clause.
func (s *Schema) sources(n ast.ResultSetNode, out []source) []source {
	switch x := n.(type) {
	case *ast.Join:
		out = s.sources(x.Left, out)
		if x.Right != nil {
			out = s.sources(x.Right, out)
		}
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			name := tn.Name.L
			if x.AsName.L != "" {
				name = x.AsName.L
			}
			out = append(out, source{name: name, columns: s.tables[tn.Name.L].columns})
		}
	}
	return out
}

// onClauses are the ON conditions of sel's joins.
func onClauses(sel *ast.SelectStmt) []ast.Node {
	var out []ast.Node
	var walk func(n ast.ResultSetNode)
	walk = func(n ast.ResultSetNode) {
		if j, ok := n.(*ast.Join); ok {
			walk(j.Left)
			if j.Right != nil {
				walk(j.Right)
			}
			if j.On != nil {
				out = append(out, j.On.Expr)
			}
		}
	}
	if sel.From != nil {
		walk(sel.From.TableRefs)
	}
	return out
}

func nodes(e ast.ExprNode) []ast.Node {
	if e == nil {
		return nil
	}
	return []ast.Node{e}
}

// columnNames collects the column names of an expression, outside its
// subqueries (which have tables of their own).
type columnNames struct{ names []*ast.ColumnName }

func (v *columnNames) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SubqueryExpr:
		return n, true
	case *ast.ColumnNameExpr:
		v.names = append(v.names, x.Name)
	}
	return n, false
}

func (v *columnNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }
