package mysqlwire

import "strings"

// QuoteIdent quotes a schema, table, column or index name for SQL the
// proxy writes: in backquotes, a backquote in the name doubled.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// QuoteTable is schema.table, both quoted.
func QuoteTable(schema, table string) string {
	return QuoteIdent(schema) + "." + QuoteIdent(table)
}

// QuoteString quotes s as a string literal: in single quotes, a single
// quote doubled and a backslash escaped, as a server reads it unless its
// sql_mode has NO_BACKSLASH_ESCAPES (which would read each escaped
// backslash as two). The proxy quotes with it on connections whose mode it
// sets itself, and names (of character sets, collations) that hold no
// backslash.
func QuoteString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
