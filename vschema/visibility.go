package vschema

import (
	"strings"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// Visibility says what of a table a session sees, as the backend's own
// information_schema would show it to the same user. The proxy's admin
// users see everything: they run the proxy.
type Visibility struct {
	// Schema and Table name the columns of a row that name a backend
	// table: the row is shown only if the backend grants the user some
	// privilege on that table (information_schema.TABLES lists it for
	// them, roles included).
	Schema, Table string
	// Owner names the column of the user a row belongs to: other users'
	// rows are shown only to holders of PROCESS (as SHOW PROCESSLIST).
	Owner string
	// Process are columns shown (else NULL) only to holders of PROCESS:
	// other users' sessions and statements.
	Process []string
	// Admin are columns shown (else NULL) only to the proxy's admins.
	Admin []string
}

// AddVisible adds a table that sessions see as v says.
func (s *Schema) AddVisible(name string, t Table, v Visibility) {
	cols := t.Columns()
	at := func(name string) int {
		for i, c := range cols {
			if c == name {
				return i
			}
		}
		return -1
	}
	s.tables[strings.ToLower(name)] = table{columns: cols, numeric: t.Numeric(),
		rows: func(st *plugins.Statement) [][]any {
			rows := t.Rows()
			if st.Admin {
				return rows
			}
			return v.filter(st, rows, at)
		}}
}

// filter keeps the rows, and masks the columns, the session may see.
func (v Visibility) filter(st *plugins.Statement, rows [][]any, at func(string) int) [][]any {
	var viewer viewer
	viewer.st = st
	schemaCol, tableCol, ownerCol := at(v.Schema), at(v.Table), at(v.Owner)
	var masked []int
	for _, c := range v.Admin {
		masked = append(masked, at(c))
	}
	if len(v.Process) > 0 && !viewer.process() {
		for _, c := range v.Process {
			masked = append(masked, at(c))
		}
	}
	if schemaCol >= 0 && tableCol >= 0 {
		viewer.learnTables(rows, schemaCol, tableCol)
	}
	out := rows[:0:0]
	for _, r := range rows {
		if schemaCol >= 0 && tableCol >= 0 && !viewer.sees(text(r[schemaCol]), text(r[tableCol])) {
			continue
		}
		if ownerCol >= 0 && text(r[ownerCol]) != st.User && !viewer.process() {
			continue
		}
		if len(masked) > 0 {
			r = append([]any(nil), r...)
			for _, c := range masked {
				if c >= 0 {
					r[c] = nil
				}
			}
		}
		out = append(out, r)
	}
	return out
}

func text(v any) string {
	s, _ := v.(string)
	return s
}

// viewer is what the backend lets one session see, asked on its own
// connection (so as the backend checks it: the user, and the role the
// session has set), once per statement. What cannot be asked is not seen.
type viewer struct {
	st        *plugins.Statement
	tables    map[[2]string]bool
	proc      int8 // 0: not asked; 1: holds PROCESS; -1: does not
	tablesErr bool
}

// learnTables asks which of the rows' tables the user may see.
func (v *viewer) learnTables(rows [][]any, schemaCol, tableCol int) {
	v.tables = map[[2]string]bool{}
	var list []string
	seen := map[[2]string]bool{}
	for _, r := range rows {
		k := [2]string{text(r[schemaCol]), text(r[tableCol])}
		if k[0] == "" || seen[k] {
			continue
		}
		seen[k] = true
		list = append(list, "("+mysqlwire.QuoteString(k[0])+", "+mysqlwire.QuoteString(k[1])+")")
	}
	if len(list) == 0 {
		return
	}
	if v.st.Backend == nil {
		v.tablesErr = true
		return
	}
	res, err := v.st.Backend.Query("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE (TABLE_SCHEMA, TABLE_NAME) IN (" +
		strings.Join(list, ", ") + ")")
	if err != nil {
		v.tablesErr = true
		return
	}
	for i := 0; i < res.RowNumber(); i++ {
		schema, _ := res.GetString(i, 0)
		table, _ := res.GetString(i, 1)
		v.tables[[2]string{strings.Clone(schema), strings.Clone(table)}] = true
	}
}

func (v *viewer) sees(schema, table string) bool {
	return !v.tablesErr && v.tables[[2]string{schema, table}]
}

// process reports whether the session holds PROCESS, by its grants and its
// current role's, as SHOW GRANTS lists them.
func (v *viewer) process() bool {
	if v.proc == 0 {
		v.proc = -1
		if v.st.Backend != nil {
			if res, err := v.st.Backend.Query("SHOW GRANTS"); err == nil {
				for i := 0; i < res.RowNumber(); i++ {
					g, _ := res.GetString(i, 0)
					if grantsProcess(g) {
						v.proc = 1
					}
				}
			}
		}
	}
	return v.proc > 0
}

// grantsProcess reports whether a line of SHOW GRANTS grants PROCESS
// globally.
func grantsProcess(line string) bool {
	privs, rest, ok := strings.Cut(line, " ON ")
	if !ok || !strings.HasPrefix(strings.TrimSpace(rest), "*.*") {
		return false
	}
	privs = strings.ToUpper(privs)
	return strings.Contains(privs, "ALL PRIVILEGES") || strings.Contains(privs, "PROCESS")
}
