package results

import (
	"encoding/binary"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/cache/eval"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Cache is the store and its counters.
type Cache struct {
	Store    *ristretto.Cache[string, *resultEntry]
	MaxEntry int

	Hits, Misses, Stores, Rejects atomic.Uint64
}

// Entry is one stored answer: a result set's packets, with the two
// EOF packets rewritten on replay to the session's status.
type resultEntry struct {
	Key        string
	data       []byte
	ends       []int32
	mid, final int32  // the EOF packets' positions in ends
	midStatus  uint16 // the EOFs' status, of which only the index-use bits are replayed
	endStatus  uint16
	rows       uint64
}

// cost is what the entry holds in memory, for the budget.
func (e *resultEntry) Cost() int64 {
	return int64(len(e.Key)+cap(e.data)+4*cap(e.ends)) + 96
}

func NewCache(budget, maxEntry int64) (*Cache, error) {
	// About one counter per 1 KB of budget: ristretto wants ten times the
	// number of entries it will hold, and answers average some 10 KB.
	counters := budget / 1024
	if counters < 1000 {
		counters = 1000
	}
	store, err := ristretto.NewCache(&ristretto.Config[string, *resultEntry]{
		NumCounters:        counters,
		MaxCost:            budget,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, err
	}
	return &Cache{Store: store, MaxEntry: int(maxEntry)}, nil
}

// Shape is what planning found about a statement for the result
// cache: nil when it is not eligible.
type Shape struct {
	Tables []lease.TableID
	// reparse: the statement's template could not be parsed (a literal
	// where the grammar takes no marker): decide on the full text.
	Reparse bool
	// names are the column names the statement mentions (lower case), and
	// opaque says it may also combine columns it does not name (UNION,
	// NATURAL JOIN, USING, * in a subquery): see TimeSafe.
	names  map[string]bool
	opaque bool
}

// ShapeOf decides whether stmt may be answered from the result
// cache, and which tables it reads.
func ShapeOf(stmt ast.StmtNode, db string) *Shape {
	switch stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
	default:
		return nil
	}
	v := &eligibility{ok: true, names: map[string]bool{}}
	stmt.Accept(v)
	if !v.ok {
		return nil
	}
	var tables []lease.TableID
	for _, t := range plugins.TablesIn(stmt, db) {
		tables = append(tables, lease.TableID(t))
	}
	if len(tables) == 0 {
		return nil
	}
	return &Shape{Tables: tables, names: v.names, opaque: v.opaque}
}

// TimeSafe reports whether a statement cannot make a TIME column of snap
// meet a date. MariaDB gives a TIME value that meets a date (a comparison,
// a cast, a function taking a date, a UNION with a date column) the
// current date, which no key can hold. A statement that only shows such
// columns (SELECT *) is safe; one that names one, or combines columns it
// does not name, is not.
func TimeSafe(snap *eval.Snapshot, shape *Shape) bool {
	for _, f := range snap.Fields {
		if f.Type == mysql.MYSQL_TYPE_TIME && (shape.opaque || shape.names[strings.ToLower(string(f.OrgName))] ||
			shape.names[strings.ToLower(string(f.Name))]) {
			return false
		}
	}
	return true
}

// eligibility walks a statement and clears ok at the first node whose
// answer may depend on anything but the tables' contents and the key.
// It is an allowlist: a node type it does not know makes the statement
// ineligible.
type eligibility struct {
	ok     bool
	depth  int // SELECTs entered and not yet left
	names  map[string]bool
	opaque bool
}

func (v *eligibility) Enter(n ast.Node) (ast.Node, bool) {
	if !v.ok {
		return n, true
	}
	switch x := n.(type) {
	case *ast.SelectStmt:
		v.depth++
		// Locking reads take locks and read the newest rows; INTO writes;
		// SQL_CALC_FOUND_ROWS sets FOUND_ROWS() for the next statement;
		// a WITH name may shadow a cached table's.
		v.ok = (x.LockInfo == nil || x.LockInfo.LockType == ast.SelectLockNone) && x.SelectIntoOpt == nil &&
			x.With == nil && x.WindowSpecs == nil && x.Kind == ast.SelectStmtKindSelect &&
			(x.SelectStmtOpts == nil || !x.SelectStmtOpts.CalcFoundRows)
	case *ast.SetOprStmt:
		v.ok = x.With == nil
		v.opaque = true
	case *ast.Join:
		v.opaque = v.opaque || x.NaturalJoin || len(x.Using) > 0
	case *ast.SelectField:
		// (The walk does not enter its WildCard.)
		v.opaque = v.opaque || x.WildCard != nil && v.depth > 1
	case *ast.ColumnName:
		v.names[x.Name.L] = true
	case *ast.TableName:
		v.ok = x.AsOf == nil && x.TableSample == nil
	case *ast.FuncCallExpr:
		v.ok = x.Schema.L == "" && deterministicFuncs[x.FnName.L] && (len(x.Args) > 0 || !needsArgs[x.FnName.L])
	case *ast.AggregateFuncExpr:
		v.ok = deterministicAggregates[strings.ToLower(x.F)]
	case *ast.FuncCastExpr:
		// A TIME value meeting a date takes the current date.
		v.ok = x.Tp == nil || x.Tp.GetType() != mysql.MYSQL_TYPE_TIME
	case *ast.SetOprSelectList, *ast.TableRefsClause, *ast.TableSource, *ast.OnCondition,
		*ast.FieldList, *ast.WildCardField, *ast.GroupByClause, *ast.HavingClause,
		*ast.OrderByClause, *ast.ByItem, *ast.Limit, *ast.ColumnNameExpr,
		*ast.BinaryOperationExpr, *ast.UnaryOperationExpr, *ast.ParenthesesExpr, *ast.PatternInExpr,
		*ast.PatternLikeOrIlikeExpr, *ast.PatternRegexpExpr, *ast.IsNullExpr, *ast.IsTruthExpr,
		*ast.BetweenExpr, *ast.CaseExpr, *ast.WhenClause, *ast.SubqueryExpr, *ast.ExistsSubqueryExpr,
		*ast.CompareSubqueryExpr, *ast.RowExpr, *ast.TimeUnitExpr, *ast.TrimDirectionExpr,
		*ast.GetFormatSelectorExpr, *ast.PositionExpr, *ast.SetCollationExpr:
	case ast.ValueExpr, ast.ParamMarkerExpr:
		// Literals and parameters (in the key).
	default:
		// Variables (@x, @@x), DEFAULT(), VALUES(), MATCH, window
		// functions, sequences, and whatever the list above does not name.
		v.ok = false
	}
	return n, !v.ok
}

func (v *eligibility) Leave(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*ast.SelectStmt); ok {
		v.depth--
	}
	return n, v.ok
}

// deterministicFuncs are the builtins whose result depends only on their
// arguments and on session settings the key holds (time_zone,
// lc_time_names, collations, div_precision_increment, ...). Left out: the
// clock (NOW, CURDATE, UNIX_TIMESTAMP(), ...), randomness (RAND, UUID),
// the connection (CONNECTION_ID, LAST_INSERT_ID, FOUND_ROWS, ROW_COUNT,
// USER), the server (VERSION), side effects (SLEEP, GET_LOCK, BENCHMARK,
// NEXTVAL), files (LOAD_FILE), settings the key does not hold (PASSWORD,
// AES_*), and functions that return TIME values, which take the current
// date when they meet a date. DATABASE() is in: the current database is
// in the key.
var deterministicFuncs = setOf(
	// strings
	"ascii", "bin", "bit_length", "char_func", "char_length", "character_length", "concat", "concat_ws",
	"elt", "export_set", "field", "find_in_set", "format", "from_base64", "hex", "insert", "instr", "lcase",
	"left", "length", "locate", "lower", "lpad", "ltrim", "make_set", "mid", "oct", "octet_length", "ord",
	"position", "quote", "repeat", "replace", "reverse", "right", "rpad", "rtrim", "soundex", "space",
	"strcmp", "substr", "substring", "substring_index", "to_base64", "trim", "ucase", "unhex", "upper",
	"regexp_like", "regexp_replace", "regexp_substr", "regexp_instr", "convert", "md5", "sha", "sha1",
	"sha2", "crc32", "compress", "uncompress", "uncompressed_length", "charset", "collation", "coercibility",
	"database", "schema",
	// numbers
	"abs", "acos", "asin", "atan", "atan2", "ceil", "ceiling", "conv", "cos", "cot", "degrees", "exp",
	"floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power", "radians", "round", "sign", "sin",
	"sqrt", "tan", "truncate", "bit_count",
	// control flow and comparison
	"if", "ifnull", "nullif", "coalesce", "isnull", "greatest", "least", "interval",
	// dates, from their arguments
	"adddate", "date", "date_add", "date_sub", "date_format", "datediff", "day", "dayname", "dayofmonth",
	"dayofweek", "dayofyear", "extract", "from_days", "from_unixtime", "get_format", "hour", "last_day",
	"makedate", "microsecond", "minute", "month", "monthname", "period_add", "period_diff", "quarter",
	"second", "subdate", "time_format", "time_to_sec", "timestampadd",
	"timestampdiff", "to_days", "to_seconds", "week", "weekday", "weekofyear", "year", "yearweek",
	"convert_tz", "unix_timestamp",
	// JSON
	"json_extract", "json_unquote", "json_object", "json_array", "json_contains", "json_contains_path",
	"json_length", "json_type", "json_valid", "json_keys", "json_quote", "json_depth", "json_search",
	"json_value",
)

// needsArgs are functions that read the clock when called without arguments.
var needsArgs = setOf("unix_timestamp")

var deterministicAggregates = setOf("count", "sum", "avg", "min", "max", "group_concat", "bit_and", "bit_or",
	"bit_xor", "std", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Session is the result cache's state of one session.
type Session struct {
	Known    bool   // settings holds the session's current settings
	Failed   bool   // they could not be read, or rule the cache out, until they change
	Settings string // the settings that change results, encoded for the key
	Key      []byte // scratch
}

// SettingsQuery reads the session settings, beyond those the
// evaluator reads, that can change a statement's answer: how literals are
// read and compared, how dates and numbers are shown, how many rows and
// how much of a GROUP_CONCAT come back, and what can decide the backend's
// plan, and so the order of rows a statement does not fully order. (The
// account and role the backend checked privileges for are in the
// evaluator's settings, part of the key too; an entry is kept only while
// the versions of its tables hold, and a change of privileges bumps them
// all: see Analyze.)
// sql_auto_is_null (1 makes "col IS NULL" read LAST_INSERT_ID()) is read to
// rule the cache out.
const SettingsQuery = "SELECT @@sql_auto_is_null, @@character_set_client, @@character_set_connection, " +
	"@@collation_connection, @@time_zone, @@lc_time_names, @@div_precision_increment, @@group_concat_max_len, " +
	"@@default_week_format, @@max_sort_length, @@sql_select_limit, @@sql_big_selects, @@max_join_size, " +
	"@@old_mode, @@optimizer_switch, @@join_cache_level, @@join_buffer_size, @@sort_buffer_size, " +
	"@@optimizer_use_condition_selectivity, @@optimizer_search_depth, @@optimizer_prune_level, " +
	"@@max_length_for_sort_data, @@tmp_table_size, @@max_heap_table_size, @@default_regex_flags"

// probe reads the session's settings for the key, once until they may
// have changed. A backend that lacks one of them (MySQL) is not served.
func (rs *Session) Probe(st *plugins.Statement) bool {
	if rs.Known || rs.Failed {
		return rs.Known
	}
	if st.Backend == nil {
		return false
	}
	r, err := st.Backend.Query(SettingsQuery)
	if err != nil {
		rs.Failed = true
		return false
	}
	defer r.Close()
	if r.RowNumber() != 1 || eval.ResultString(r, 0, 0) != "0" {
		rs.Failed = true
		return false
	}
	var b []byte
	for i := 1; i < len(r.Fields); i++ {
		b = AppendKeyField(b, eval.ResultString(r, 0, i))
	}
	rs.Settings, rs.Known = string(b), true
	return true
}

// AppendStatementKey appends to key what a key holds of st and its
// session: the protocol and metadata flavour, the user, the current
// database, the evaluator's settings (evalSettings) and the session's
// own, the statement's text and, for an execute, its parameters. It
// fails for an execute whose parameters cannot be keyed (see
// AppendParamsKey).
func (s *Session) AppendStatementKey(key []byte, st *plugins.Statement, evalSettings string) ([]byte, bool) {
	binaryProto := st.Command == plugins.ComStmtExecute
	if binaryProto {
		key = append(key, 'b')
	} else {
		key = append(key, 't')
	}
	if st.ExtendedMetadata {
		key = append(key, 'x')
	} else {
		key = append(key, '-')
	}
	key = AppendKeyField(key, st.User)
	key = AppendKeyField(key, st.DB)
	key = AppendKeyField(key, evalSettings)
	key = AppendKeyField(key, s.Settings)
	key = AppendKeyField(key, st.SQL)
	if binaryProto {
		return AppendParamsKey(key, st)
	}
	return key, true
}

// AppendKeyField appends s, length first, so that no two different lists
// of fields encode alike.
func AppendKeyField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendParamsKey appends a COM_STMT_EXECUTE's parameters: the types in
// force, the NULL bitmap and the values, as sent. It fails for an
// execution that opens a cursor (its rows come through COM_STMT_FETCH) or
// a parameter block it cannot split.
func AppendParamsKey(b []byte, st *plugins.Statement) ([]byte, bool) {
	p, n := st.Params, st.ParamCount
	if len(p) < 5 || p[0] != 0 || st.LongData {
		return b, false
	}
	if n == 0 {
		return AppendKeyField(b, ""), true
	}
	bitmap := 5 + (n+7)/8
	if len(p) < bitmap+1 || len(st.ParamTypes) != 2*n {
		return b, false
	}
	vals := bitmap + 1
	if p[bitmap] == 1 {
		vals += 2 * n
	}
	if len(p) < vals {
		return b, false
	}
	b = AppendKeyField(b, unsafe.String(unsafe.SliceData(st.ParamTypes), len(st.ParamTypes)))
	b = AppendKeyField(b, unsafe.String(unsafe.SliceData(p[5:bitmap]), bitmap-5))
	return AppendKeyField(b, unsafe.String(unsafe.SliceData(p[vals:]), len(p)-vals)), true
}

// NewEntry checks that a recorded response is exactly one result
// set (column count, definitions, EOF, rows, EOF) with no warnings, no
// cursor and no more results, and builds its entry.
func NewEntry(key string, c *plugins.Capture) (*resultEntry, bool) {
	n := len(c.Ends)
	if n < 3 || c.Data == nil {
		return nil, false
	}
	pkt := func(i int) []byte {
		start := 0
		if i > 0 {
			start = c.Ends[i-1]
		}
		return c.Data[start:c.Ends[i]]
	}
	first := pkt(0)
	ncols, w, ok := mysqlwire.ReadLenEncInt(first)
	if !ok || w != len(first) || ncols == 0 || ncols > uint64(n) {
		return nil, false
	}
	mid, final := int(ncols)+1, n-1
	if mid >= final {
		return nil, false
	}
	midStatus, ok := cleanEOF(pkt(mid), mysql.SERVER_STATUS_CURSOR_EXISTS|mysql.SERVER_MORE_RESULTS_EXISTS)
	if !ok {
		return nil, false
	}
	endStatus, ok := cleanEOF(pkt(final), mysql.SERVER_MORE_RESULTS_EXISTS)
	if !ok {
		return nil, false
	}
	for i := 1; i < final; i++ {
		if i == mid {
			continue
		}
		if b := pkt(i); len(b) == 0 || b[0] == mysqlwire.MarkErr || mysqlwire.IsEOF(b) {
			return nil, false
		}
	}
	e := &resultEntry{Key: key, mid: int32(mid), final: int32(final), midStatus: midStatus, endStatus: endStatus,
		rows: uint64(final - mid - 1)}
	e.data = c.Data
	if cap(e.data) > len(e.data)+len(e.data)/8 {
		e.data = append([]byte(nil), c.Data...) // give back the slack of growth
	}
	e.ends = make([]int32, n)
	for i, end := range c.Ends {
		e.ends[i] = int32(end)
	}
	return e, true
}

// cleanEOF returns an EOF packet's status if it is an EOF without
// warnings and without any of the bad status bits.
func cleanEOF(b []byte, bad uint16) (uint16, bool) {
	if !mysqlwire.IsEOF(b) || len(b) < 5 {
		return 0, false
	}
	warnings, status := mysqlwire.ParseEOF(b)
	return status, warnings == 0 && status&bad == 0
}

// replay writes the stored answer, with the session's status in its EOF
// packets (and the backend's bits about index use, as the evaluator does).
func (e *resultEntry) Replay(w plugins.ResponseWriter) error {
	start := int32(0)
	for i, end := range e.ends {
		var err error
		switch int32(i) {
		case e.mid:
			err = WriteEOF(w, e.midStatus, nil)
		case e.final:
			err = WriteEOF(w, e.endStatus, nil)
		default:
			err = w.WritePacket(e.data[start:end])
		}
		if err != nil {
			return err
		}
		start = end
	}
	w.Rows(e.rows)
	return nil
}

// WriteEOF writes an EOF packet; scratch (nil or any buffer whose contents
// are no longer needed) is where it is composed.
func WriteEOF(w plugins.ResponseWriter, learnedStatus uint16, scratch []byte) error {
	s := w.Status() | learnedStatus&plugins.IndexUsageStatus
	return w.WritePacket(mysqlwire.AppendEOF(scratch[:0], 0, s))
}
