// Package vschema owns the virtual schema "tableproxy": the proxy's own
// state shown as tables (tableproxy.cached_tables, ddl_jobs,
// cluster_members, ...), answered by the proxy and never sent to the
// backend, which has no such database. Each plugin that is on contributes
// its tables (a Table, which the plugin's type satisfies as it is); the
// schema is there whatever plugins are on, with fewer tables when fewer
// are.
//
// Every read-only SELECT of its tables is answered by the evaluator of
// cached reads (package cache) over snapshots of the tables' rows built
// per statement; SHOW TABLES, SHOW COLUMNS, DESCRIBE and USE of the
// schema are answered here. What the evaluator does not cover, and
// statements that mix these tables with the backend's, get 1235
// (ER_NOT_SUPPORTED_YET) saying what; an unknown table 1146 and an
// unknown column 1054, as the backend would.
//
// What can go wrong: the answerer sits first on the chain, on every
// statement's path, so it decides with a cheap text test
// (mentionsSchema) before it parses anything.
package vschema

import (
	"sort"
	"strings"

	"tableproxy/plugins"
)

// Name is the virtual schema's name, and the answerer's on the chain.
const Name = "tableproxy"

// Table is a table of the virtual schema: its columns in order, which of
// them are BIGINT (the others are VARCHAR), and its rows (int64, string
// or nil for NULL, one value per column), read once per statement.
type Table interface {
	Columns() []string
	Numeric() map[string]bool
	Rows() [][]any
}

// SessionTable is a table whose rows are the statement's session's own
// (tableproxy.last_statement).
type SessionTable interface {
	Columns() []string
	Numeric() map[string]bool
	SessionRows(st *plugins.Statement) [][]any
}

// table is either kind, with its rows read for a statement.
type table struct {
	columns []string
	numeric map[string]bool
	rows    func(st *plugins.Statement) [][]any
}

// Schema is the virtual schema and the chain's answerer of statements
// that read it.
type Schema struct {
	tables map[string]table // by lower-case name
}

// New returns an empty virtual schema.
func New() *Schema { return &Schema{tables: map[string]table{}} }

// Add adds a table. Tables are added before the proxy serves: the schema
// is read without a lock.
func (s *Schema) Add(name string, t Table) {
	s.tables[strings.ToLower(name)] = table{columns: t.Columns(), numeric: t.Numeric(),
		rows: func(*plugins.Statement) [][]any { return t.Rows() }}
}

// AddSession adds a table whose rows are per session.
func (s *Schema) AddSession(name string, t SessionTable) {
	s.tables[strings.ToLower(name)] = table{columns: t.Columns(), numeric: t.Numeric(), rows: t.SessionRows}
}

// Name is the answerer's name on the chain.
func (s *Schema) Name() string { return Name }

// names are the tables' names, sorted.
func (s *Schema) names() []string {
	out := make([]string, 0, len(s.tables))
	for n := range s.tables {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// mentionsSchema is the cheap test, run on every statement, for whether
// it may name the virtual schema: an ASCII case-insensitive search for
// the word "tableproxy" (not part of a longer name), without allocating.
func mentionsSchema(sql string) bool {
	for i := 0; i+len(Name) <= len(sql); i++ {
		if sql[i]|0x20 != 't' || i > 0 && identChar(sql[i-1]) {
			continue
		}
		j := 0
		for ; j < len(Name); j++ {
			c := sql[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != Name[j] {
				break
			}
		}
		if j == len(Name) && (i+j == len(sql) || !identChar(sql[i+j])) {
			return true
		}
	}
	return false
}

func identChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
