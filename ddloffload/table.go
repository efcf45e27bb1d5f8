package ddloffload

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/mysqlwire"
)

// column is one column of the table, from information_schema.
type column struct {
	Name      string
	Ordinal   int    // 0-based position in the row images of the binary log
	DataType  string // lower case, as information_schema.COLUMNS.DATA_TYPE
	Unsigned  bool
	Nullable  bool
	Charset   string // empty for non-character types and binary strings
	Collation string
	Generated bool
}

// index is one existing index, from SHOW INDEX.
type index struct {
	Name     string
	Unique   bool
	Columns  []string
	Nullable bool // a key column allows NULL
	Type     string
}

// tableInfo is what the job knows of the table.
type tableInfo struct {
	Schema, Table string
	Columns       []column
	byName        map[string]*column
	Indexes       []index
	Key           []*column // the key the job walks and deduplicates by
	KeyName       string
	RowsEstimate  int64
	DataLength    int64 // bytes the table takes: see tableBytes
}

func (t *tableInfo) name() string { return mysqlwire.QuoteTable(t.Schema, t.Table) }

func (t *tableInfo) column(name string) *column { return t.byName[strings.ToLower(name)] }

func (t *tableInfo) hasIndex(name string) bool {
	for _, ix := range t.Indexes {
		if strings.EqualFold(ix.Name, name) {
			return true
		}
	}
	return false
}

// tableBytes estimates the bytes the table takes, for the auto strategy's
// size rule. information_schema's DATA_LENGTH alone is not enough: InnoDB
// refreshes it only when it recalculates the table's statistics, so right
// after a bulk load it still reads a few pages. TABLE_ROWS, by contrast,
// follows every insert, so the estimate is the largest of DATA_LENGTH,
// TABLE_ROWS times the average width of a sample of rows, and, where the
// job's user may read it (PROCESS), the size of the table's tablespace file
// (MariaDB's INNODB_SYS_TABLESPACES, MySQL 8's INNODB_TABLESPACES). ANALYZE
// TABLE would refresh the statistics, but on MySQL it waits for every open
// handle of the table to be flushed.
func tableBytes(c *client.Conn, t *tableInfo, dataLength int64) int64 {
	size := dataLength
	if len(t.Columns) > 0 && t.RowsEstimate > 0 {
		widths := make([]string, len(t.Columns))
		names := make([]string, len(t.Columns))
		for i, col := range t.Columns {
			names[i] = mysqlwire.QuoteIdent(col.Name)
			widths[i] = "IFNULL(LENGTH(" + names[i] + "), 0)"
		}
		r, err := c.Execute(fmt.Sprintf("SELECT IFNULL(AVG(%s), 0) FROM (SELECT %s FROM %s LIMIT %d) AS sample",
			strings.Join(widths, " + "), strings.Join(names, ", "), t.name(), sizeSampleRows))
		if err == nil {
			if avg, _ := r.GetFloat(0, 0); int64(avg*float64(t.RowsEstimate)) > size {
				size = int64(avg * float64(t.RowsEstimate))
			}
		}
	}
	for _, view := range []string{"INNODB_SYS_TABLESPACES", "INNODB_TABLESPACES"} {
		r, err := c.Execute(`SELECT IFNULL(MAX(FILE_SIZE), 0) FROM information_schema.`+view+` WHERE NAME = ?`, t.Schema+"/"+t.Table)
		if err != nil {
			continue // the other flavour's view, or no PROCESS privilege
		}
		if file, _ := r.GetInt(0, 0); file > size {
			size = file
		}
		break
	}
	return size
}

// sizeSampleRows is how many rows tableBytes reads for a row's width.
const sizeSampleRows = 1000

// loadTable reads the table's columns and indexes. A table that does not
// exist is error 1146.
func loadTable(c *client.Conn, schema, table string) (*tableInfo, error) {
	t := &tableInfo{Schema: schema, Table: table, byName: map[string]*column{}}
	// MySQL 8 answers information_schema.TABLES from a cache that is a day
	// old by default; MariaDB has no such cache, nor the variable.
	_, _ = c.Execute("SET SESSION information_schema_stats_expiry = 0")
	r, err := c.Execute(`SELECT TABLE_TYPE, IFNULL(TABLE_ROWS, 0), IFNULL(DATA_LENGTH, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, table)
	if err != nil {
		return nil, err
	}
	if r.RowNumber() == 0 {
		return nil, errNoSuchTable(schema, table)
	}
	if typ, _ := r.GetString(0, 0); typ != "BASE TABLE" {
		return nil, errUnsupported(fmt.Sprintf("'%s.%s' is not a base table", schema, table))
	}
	t.RowsEstimate, _ = r.GetInt(0, 1)
	dataLength, _ := r.GetInt(0, 2)
	r, err = c.Execute(`SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, IFNULL(CHARACTER_SET_NAME, ''),
		IFNULL(COLLATION_NAME, ''), EXTRA FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, schema, table)
	if err != nil {
		return nil, err
	}
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		dt, _ := r.GetString(i, 1)
		ct, _ := r.GetString(i, 2)
		null, _ := r.GetString(i, 3)
		cs, _ := r.GetString(i, 4)
		coll, _ := r.GetString(i, 5)
		extra, _ := r.GetString(i, 6)
		extra = strings.ToUpper(extra)
		t.Columns = append(t.Columns, column{Name: name, Ordinal: i, DataType: strings.ToLower(dt),
			Unsigned: strings.Contains(strings.ToLower(ct), "unsigned"), Nullable: null == "YES",
			Charset: cs, Collation: coll,
			Generated: strings.Contains(extra, "VIRTUAL GENERATED") || strings.Contains(extra, "STORED GENERATED") ||
				strings.Contains(extra, "PERSISTENT GENERATED")})
	}
	for i := range t.Columns {
		t.byName[strings.ToLower(t.Columns[i].Name)] = &t.Columns[i]
	}
	t.DataLength = tableBytes(c, t, dataLength)
	r, err = c.Execute("SHOW INDEX FROM " + t.name())
	if err != nil {
		return nil, err
	}
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetStringByName(i, "Key_name")
		nonUnique, _ := r.GetIntByName(i, "Non_unique")
		col, _ := r.GetStringByName(i, "Column_name")
		null, _ := r.GetStringByName(i, "Null")
		typ, _ := r.GetStringByName(i, "Index_type")
		if n := len(t.Indexes); n == 0 || t.Indexes[n-1].Name != name {
			t.Indexes = append(t.Indexes, index{Name: name, Unique: nonUnique == 0, Type: typ})
		}
		ix := &t.Indexes[len(t.Indexes)-1]
		ix.Columns = append(ix.Columns, col)
		if null == "YES" {
			ix.Nullable = true
		}
	}
	return t, nil
}

// chooseKey picks the key to walk: the primary key, or else the first
// unique key whose columns are all NOT NULL (InnoDB clusters by that one).
func (t *tableInfo) chooseKey() bool {
	pick := func(ix index) {
		t.KeyName = ix.Name
		for _, c := range ix.Columns {
			t.Key = append(t.Key, t.column(c))
		}
	}
	for _, ix := range t.Indexes {
		if ix.Name == "PRIMARY" {
			pick(ix)
			return true
		}
	}
	for _, ix := range t.Indexes {
		if ix.Unique && !ix.Nullable && ix.Type == "BTREE" {
			pick(ix)
			return true
		}
	}
	return false
}

// copyColumns are the columns a copy writes: every stored, non-generated one.
func (t *tableInfo) copyColumns() string {
	return t.copyList(func(c *column) string { return mysqlwire.QuoteIdent(c.Name) })
}

// copyList renders each column a copy writes with f, comma-separated.
func (t *tableInfo) copyList(f func(c *column) string) string {
	var b strings.Builder
	for i := range t.Columns {
		if t.Columns[i].Generated {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f(&t.Columns[i]))
	}
	return b.String()
}

// keyList is the key's columns, for ORDER BY and SELECT.
func (t *tableInfo) keyList() string {
	names := make([]string, len(t.Key))
	for i, c := range t.Key {
		names[i] = mysqlwire.QuoteIdent(c.Name)
	}
	return strings.Join(names, ", ")
}

// keyCompare renders "key op (v...)" for a tuple compare, op one of >, >=,
// <, <=, expanded into ANDs and ORs that the optimizer turns into a range
// on every version of MySQL and MariaDB.
func (t *tableInfo) keyCompare(op string, vals []string) string {
	strict := op[:1] // > or <
	var ors []string
	for i := range t.Key {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, mysqlwire.QuoteIdent(t.Key[j].Name)+" = "+vals[j])
		}
		o := strict
		if i == len(t.Key)-1 {
			o = op
		}
		ands = append(ands, mysqlwire.QuoteIdent(t.Key[i].Name)+" "+o+" "+vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// keyIn renders a condition that matches exactly the rows with these keys.
func (t *tableInfo) keyIn(keys [][]string) string {
	if len(t.Key) == 1 {
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = k[0]
		}
		return mysqlwire.QuoteIdent(t.Key[0].Name) + " IN (" + strings.Join(vals, ", ") + ")"
	}
	ors := make([]string, len(keys))
	for i, k := range keys {
		ands := make([]string, len(k))
		for j, v := range k {
			ands[j] = mysqlwire.QuoteIdent(t.Key[j].Name) + " = " + v
		}
		ors[i] = "(" + strings.Join(ands, " AND ") + ")"
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// keyTypeSupported reports whether the job can walk a key column of this
// type. ENUM and SET order by their index but compare with strings by
// value, and floating-point values do not survive text: both would make
// chunk bounds wrong, so such tables are refused.
func keyTypeSupported(dt string) bool {
	switch dt {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal",
		"char", "varchar", "binary", "varbinary",
		"date", "datetime", "timestamp", "time", "year":
		return true
	}
	return false
}

func isIntType(dt string) bool {
	switch dt {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		return true
	}
	return false
}

func isTemporal(dt string) bool {
	switch dt {
	case "date", "datetime", "timestamp", "time":
		return true
	}
	return false
}

// textLiteral renders a key value read through the text protocol (the job's
// connections read in utf8mb4) as an SQL literal of the column's type.
func (c *column) textLiteral(raw []byte) (string, error) {
	if raw == nil {
		return "NULL", nil
	}
	switch {
	case isIntType(c.DataType) || c.DataType == "decimal":
		return numeric(raw)
	case isTemporal(c.DataType):
		return temporal(raw)
	case c.Charset == "":
		return "X'" + hex.EncodeToString(raw) + "'", nil
	}
	return fmt.Sprintf("CONVERT(CONVERT(X'%s' USING utf8mb4) USING %s) COLLATE %s", hex.EncodeToString(raw), c.Charset, c.Collation), nil
}

// binlogLiteral renders a value decoded from a row image of the binary log.
// Integers arrive signed; strings arrive as bytes in the column's charset.
func (c *column) binlogLiteral(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "NULL", nil
	case int8:
		return c.intLiteral(int64(x), 8), nil
	case int16:
		return c.intLiteral(int64(x), 16), nil
	case int32:
		bits := uint(32)
		if c.DataType == "mediumint" {
			bits = 24
		}
		return c.intLiteral(int64(x), bits), nil
	case int64:
		return c.intLiteral(x, 64), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case string:
		return c.bytesLiteral([]byte(x))
	case []byte:
		return c.bytesLiteral(x)
	}
	return "", fmt.Errorf("column %s: unexpected binary log value %T", c.Name, v)
}

func (c *column) intLiteral(v int64, bits uint) string {
	if c.Unsigned && v < 0 {
		if bits == 64 {
			return strconv.FormatUint(uint64(v), 10)
		}
		return strconv.FormatInt(v+(1<<bits), 10)
	}
	return strconv.FormatInt(v, 10)
}

func (c *column) bytesLiteral(b []byte) (string, error) {
	switch {
	case isIntType(c.DataType) || c.DataType == "decimal":
		return numeric(b)
	case isTemporal(c.DataType):
		return temporal(b)
	case c.Charset == "":
		return "X'" + hex.EncodeToString(b) + "'", nil
	}
	return fmt.Sprintf("CONVERT(X'%s' USING %s) COLLATE %s", hex.EncodeToString(b), c.Charset, c.Collation), nil
}

// numberRE is a number as the binary log's decoder prints an integer or a
// DECIMAL: a sign, digits, a fraction. Anything else (say "1--", which
// would start a comment in the job's SQL) is refused.
var numberRE = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?$`)

func numeric(b []byte) (string, error) {
	// (A key of an integer or DECIMAL column has at most 65 digits, a
	// sign and a point; a longer number is no value of one.)
	if len(b) > 67 || !numberRE.Match(b) {
		return "", fmt.Errorf("not a number: %q", b)
	}
	return string(b), nil
}

func temporal(b []byte) (string, error) {
	for _, ch := range b {
		if !(ch >= '0' && ch <= '9' || ch == '-' || ch == ':' || ch == ' ' || ch == '.') {
			return "", fmt.Errorf("not a date or time: %q", b)
		}
	}
	return "'" + string(b) + "'", nil
}

// checksumExpr is an expression over one row that changes when any stored
// column does: character and binary values by their bytes (a cast to
// BINARY, three times cheaper than HEX), the rest by their text, and NULL
// told apart from every value.
func (t *tableInfo) checksumExpr() string {
	var parts, nulls []string
	for _, c := range t.Columns {
		if c.Generated {
			continue
		}
		q := mysqlwire.QuoteIdent(c.Name)
		switch {
		case c.DataType == "float":
			parts = append(parts, "CAST("+q+" AS DOUBLE)") // its text has six digits
		case c.Charset != "" || strings.Contains(c.DataType, "binary") || strings.Contains(c.DataType, "blob") ||
			c.DataType == "bit" || c.DataType == "enum" || c.DataType == "set":
			parts = append(parts, "CAST("+q+" AS BINARY)")
		default:
			parts = append(parts, q)
		}
		if c.Nullable {
			nulls = append(nulls, "ISNULL("+q+")")
		}
	}
	if len(nulls) > 0 {
		parts = append(parts, "CONCAT("+strings.Join(nulls, ", ")+")")
	}
	return "CRC32(CONCAT_WS('#', " + strings.Join(parts, ", ") + "))"
}
