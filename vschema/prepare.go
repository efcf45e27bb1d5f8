package vschema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// A prepared statement lives on the backend, which cannot prepare a
// statement naming tables it has not: the backend prepares a stand-in
// instead, with the statement's result columns (by name) and its
// parameters, so that the prepare's answer describes the statement as
// the client wrote it. The executions, which the chain sees with the
// client's own text, are answered here.

// prepareAs lets the prepare of stmt, whose result columns are columns,
// pass as its stand-in.
func prepareAs(stmt ast.Node, columns []string) plugins.Action {
	return plugins.Action{PrepareAs: standIn(columns, paramMarkers(stmt))}
}

// standIn is a statement any backend prepares, with the given result
// columns and n parameter markers: SELECT NULL AS `a`, NULL AS `b` FROM
// DUAL WHERE ? IS NULL AND ? IS NULL.
func standIn(columns []string, n int) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("NULL AS ")
		b.WriteString(mysqlwire.QuoteIdent(c))
	}
	if len(columns) == 0 {
		b.WriteString("NULL")
	}
	for i := 0; i < n; i++ {
		if i == 0 {
			b.WriteString(" FROM DUAL WHERE ")
		} else {
			b.WriteString(" AND ")
		}
		b.WriteString("? IS NULL")
	}
	return b.String()
}

// paramMarkers counts a statement's parameter markers.
func paramMarkers(stmt ast.Node) int {
	v := &markers{}
	stmt.Accept(v)
	return v.n
}

type markers struct{ n int }

func (v *markers) Enter(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*test_driver.ParamMarkerExpr); ok {
		v.n++
	}
	return n, false
}

func (v *markers) Leave(n ast.Node) (ast.Node, bool) { return n, true }
