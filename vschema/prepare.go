package vschema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"tableproxy/plugins"
)

// A prepared statement lives on the backend, which cannot prepare a
// statement naming tables it has not: the backend prepares a stand-in
// with as many parameters instead, and the executions, which the chain
// sees with the client's own text, are answered here.

// prepareAs lets the prepare of stmt pass as its stand-in.
func prepareAs(stmt ast.Node) plugins.Action {
	v := &markers{}
	stmt.Accept(v)
	return plugins.Action{PrepareAs: standIn(v.n)}
}

// standIn is a statement with n parameters that any backend prepares.
func standIn(n int) string {
	if n == 0 {
		return "SELECT 1"
	}
	return "SELECT ?" + strings.Repeat(", ?", n-1)
}

// markers counts a statement's parameter markers.
type markers struct{ n int }

func (v *markers) Enter(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*test_driver.ParamMarkerExpr); ok {
		v.n++
	}
	return n, false
}

func (v *markers) Leave(n ast.Node) (ast.Node, bool) { return n, true }
