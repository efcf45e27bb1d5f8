package vschema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// grantsBackend answers the viewer's two questions as a backend would for
// a user who may see the tables in visible and holds PROCESS if process.
type grantsBackend struct {
	visible []string // "schema.table"
	process bool
	asked   []string
}

func (b *grantsBackend) Query(sql string) (*mysql.Result, error) {
	b.asked = append(b.asked, sql)
	var rows [][]string
	var cols []string
	switch {
	case strings.HasPrefix(sql, "SHOW GRANTS"):
		cols = []string{"Grants"}
		rows = append(rows, []string{"GRANT USAGE ON *.* TO `u`@`%`"})
		if b.process {
			rows = append(rows, []string{"GRANT PROCESS ON *.* TO `r`"})
		}
		rows = append(rows, []string{"GRANT SELECT, PROCESS ON `db`.* TO `u`@`%`"}) // (not global)
	default:
		cols = []string{"TABLE_SCHEMA", "TABLE_NAME"}
		for _, v := range b.visible {
			s, t, _ := strings.Cut(v, ".")
			if strings.Contains(sql, fmt.Sprintf("('%s', '%s')", s, t)) {
				rows = append(rows, []string{s, t})
			}
		}
	}
	rs := mysql.NewResultset(len(cols))
	for i, c := range cols {
		rs.Fields[i] = &mysql.Field{Name: []byte(c), Type: mysql.MYSQL_TYPE_VAR_STRING}
	}
	for _, r := range rows {
		vals := make([]mysql.FieldValue, len(r))
		for i, v := range r {
			vals[i] = mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(v))
		}
		rs.Values = append(rs.Values, vals)
	}
	return mysql.NewResult(rs), nil
}

type rowsTable struct {
	cols []string
	rows [][]any
}

func (t rowsTable) Columns() []string        { return t.cols }
func (t rowsTable) Numeric() map[string]bool { return nil }
func (t rowsTable) Rows() [][]any            { return t.rows }

// A user sees the rows of tables the backend shows them, their own rows,
// and others' sessions and admin columns only when entitled; an admin
// sees everything, and a session whose backend cannot be asked sees
// nothing it would need to ask for.
func TestVisibilityAsTheBackendShows(t *testing.T) {
	s := New()
	s.AddVisible("t", rowsTable{cols: []string{"schema_name", "table_name", "user", "blocked_by", "address"}, rows: [][]any{
		{"db", "pub", "u", "session 7 of v: UPDATE ...", "10.0.0.1:7033"},
		{"db", "secret", "u", "", "10.0.0.1:7033"},
		{"db", "pub", "v", "", "10.0.0.1:7033"},
	}}, Visibility{Schema: "schema_name", Table: "table_name", Owner: "user", Process: []string{"blocked_by"}, Admin: []string{"address"}})
	rowsFor := func(st *plugins.Statement) string {
		var out []string
		for _, r := range s.tables["t"].rows(st) {
			out = append(out, fmt.Sprint(r...))
		}
		return strings.Join(out, "; ")
	}
	plain := &grantsBackend{visible: []string{"db.pub"}}
	if got, want := rowsFor(&plugins.Statement{User: "u", Backend: plain}), "dbpubu<nil> <nil>"; got != want {
		t.Errorf("a user with a grant on pub alone: %q, want %q", got, want)
	}
	proc := &grantsBackend{visible: []string{"db.pub", "db.secret"}, process: true}
	if got, want := rowsFor(&plugins.Statement{User: "u", Backend: proc}),
		"dbpubusession 7 of v: UPDATE ...<nil>; dbsecretu<nil>; dbpubv<nil>"; got != want {
		t.Errorf("a user with PROCESS (through a role) and grants on both: %q, want %q", got, want)
	}
	if got := rowsFor(&plugins.Statement{User: "ops", Admin: true}); strings.Count(got, ";") != 2 || !strings.Contains(got, "10.0.0.1") {
		t.Errorf("an admin: %q, want every row and column", got)
	}
	if got := rowsFor(&plugins.Statement{User: "u"}); got != "" {
		t.Errorf("no backend to ask: %q, want nothing", got)
	}
}
