package ddloffload

import (
	"testing"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/plugins"
)

// FuzzBinlogLiteral: a key value read from the binary log, whatever a user
// stored in it, becomes a literal the job puts in its SQL (a keyed
// re-copy): it is a literal or an error, never more SQL: "SELECT <lit>, 7"
// parses as one SELECT of two fields (a comment or a quote the literal
// opened would swallow the second).
func FuzzBinlogLiteral(f *testing.F) {
	for _, s := range []string{"42", "-7", "3.14", "2026-12-07 10:00:00", "'; DROP TABLE t; --", "1--", "1/*", "x'00'", "\\'"} {
		f.Add(s)
	}
	cols := []column{
		{Name: "i", DataType: "bigint"}, {Name: "d", DataType: "decimal"}, {Name: "t", DataType: "datetime"},
		{Name: "s", DataType: "varchar", Charset: "utf8mb4", Collation: "utf8mb4_general_ci"}, {Name: "b", DataType: "varbinary"},
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, c := range cols {
			for _, val := range []any{v, []byte(v)} {
				lit, err := c.binlogLiteral(val)
				if err != nil {
					continue
				}
				pd := plugins.Parse("SELECT " + lit + ", 7")
				ok := pd.Err == nil && len(pd.Stmts) == 1
				if ok {
					sel, isSel := pd.Stmts[0].(*ast.SelectStmt)
					ok = isSel && sel.Fields != nil && len(sel.Fields.Fields) == 2
				}
				pd.Release()
				if !ok {
					t.Fatalf("%s column: value %q became %q, which is more than one literal (%v)", c.DataType, v, lit, pd.Err)
				}
			}
		}
	})
}
