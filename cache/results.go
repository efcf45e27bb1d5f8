package cache

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/cache/eval"
	"tableproxy/configs"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// The result cache answers read-only statements over cached tables that
// the evaluator does not cover (functions, joins, GROUP BY, ...) with the
// backend's own earlier answer to the same statement, replayed packet by
// packet. An answer is stored under a key that holds everything it
// depends on: the statement (exact text, or prepared text and parameter
// bytes), protocol and metadata flavour, user, current database, the
// session settings that change results, and the version of every table
// the statement reads. Versions only go up, and every write bumps them, so
// an entry stops matching the moment any of its tables is written; it is
// never deleted, only evicted (ristretto, cost = bytes held).
//
// What can go wrong, and what stops it:
//   - an answer computed while a table was being written: the versions in
//     the key are read before the statement is sent, with no write intent
//     open; a hit needs every table servable (no intent open) at exactly
//     those versions, and every write that ends bumps them, so a hit can
//     only happen while every write that ever began on those tables had
//     ended before the versions were read, all of which the backend's
//     answer saw. On top of that, an answer is stored only if the tables
//     are still servable at the same versions once it has arrived (an
//     intent open then makes a table unservable; one opened and closed
//     meanwhile bumped the version): an answer that can never be served is
//     not kept, and the rule holds without relying on the argument above;
//   - an answer that depends on something outside the key (the clock,
//     RAND, the connection, variables, stored functions, locking reads):
//     such statements are not eligible, by an allowlist of syntax and
//     builtin functions, so anything unknown goes to the backend;
//   - an answer read inside a transaction reflects its read view, not the
//     table's version: answers are stored only from statements run outside
//     a transaction, under an isolation level that reads committed data;
//   - a table cached again after NOCACHE: its version did not move while it
//     was not cached, so the key also holds the cached table's generation,
//     new each time it is cached;
//   - the parser reading a statement otherwise than MariaDB does (a
//     /*M! */ comment, ANSI_QUOTES, NO_BACKSLASH_ESCAPES): not eligible;
//   - a TIME value meeting a date takes the current date: a statement that
//     could make a TIME column do so is not eligible (timeSafe);
//   - a hash collision: the full key is kept in the entry and compared.
//
// Writes that bypass the proxy are seen through the binary log, as for
// the evaluator: an answer may be served until the log shows the write.
// Rows of a statement without a total ORDER BY come in the order the
// backend's plan produced when the answer was stored.

// resultCache is the store and its counters.
type resultCache struct {
	store    *ristretto.Cache[string, *resultEntry]
	maxEntry int

	hits, misses, stores, rejects atomic.Uint64
}

// resultEntry is one stored answer: a result set's packets, with the two
// EOF packets rewritten on replay to the session's status.
type resultEntry struct {
	key        string
	data       []byte
	ends       []int32
	mid, final int32  // the EOF packets' positions in ends
	midStatus  uint16 // the EOFs' status, of which only the index-use bits are replayed
	endStatus  uint16
	rows       uint64
}

// cost is what the entry holds in memory, for the budget.
func (e *resultEntry) cost() int64 {
	return int64(len(e.key)+cap(e.data)+4*cap(e.ends)) + 96
}

func newResultCache(budget, maxEntry int64) (*resultCache, error) {
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
	return &resultCache{store: store, maxEntry: int(maxEntry)}, nil
}

// resultShape is what planning found about a statement for the result
// cache: nil when it is not eligible.
type resultShape struct {
	tables []lease.TableID
	// reparse: the statement's template could not be parsed (a literal
	// where the grammar takes no marker): decide on the full text.
	reparse bool
	// names are the column names the statement mentions (lower case), and
	// opaque says it may also combine columns it does not name (UNION,
	// NATURAL JOIN, USING, * in a subquery): see timeSafe.
	names  map[string]bool
	opaque bool
}

// resultShapeOf decides whether stmt may be answered from the result
// cache, and which tables it reads.
func resultShapeOf(stmt ast.StmtNode, db string) *resultShape {
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
	tables := collectTables(stmt, db)
	if len(tables) == 0 {
		return nil
	}
	return &resultShape{tables: tables, names: v.names, opaque: v.opaque}
}

// timeSafe reports whether a statement cannot make a TIME column of snap
// meet a date. MariaDB gives a TIME value that meets a date (a comparison,
// a cast, a function taking a date, a UNION with a date column) the
// current date, which no key can hold. A statement that only shows such
// columns (SELECT *) is safe; one that names one, or combines columns it
// does not name, is not.
func timeSafe(snap *eval.Snapshot, shape *resultShape) bool {
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

// resultSession is the result cache's state of one session.
type resultSession struct {
	known    bool   // settings holds the session's current settings
	failed   bool   // they could not be read, or rule the cache out, until they change
	settings string // the settings that change results, encoded for the key
	pending  *pendingResult
	key      []byte // scratch
}

// pendingResult is a response being recorded, to be stored if its guard
// holds when it has arrived.
type pendingResult struct {
	key      string
	tables   []*tableState
	versions []lease.Version
	capture  plugins.Capture
}

// resultSettingsQuery reads the session settings, beyond those the
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
const resultSettingsQuery = "SELECT @@sql_auto_is_null, @@character_set_client, @@character_set_connection, " +
	"@@collation_connection, @@time_zone, @@lc_time_names, @@div_precision_increment, @@group_concat_max_len, " +
	"@@default_week_format, @@max_sort_length, @@sql_select_limit, @@sql_big_selects, @@max_join_size, " +
	"@@old_mode, @@optimizer_switch, @@join_cache_level, @@join_buffer_size, @@sort_buffer_size, " +
	"@@optimizer_use_condition_selectivity, @@optimizer_search_depth, @@optimizer_prune_level, " +
	"@@max_length_for_sort_data, @@tmp_table_size, @@max_heap_table_size, @@default_regex_flags"

// probe reads the session's settings for the key, once until they may
// have changed. A backend that lacks one of them (MySQL) is not served.
func (rs *resultSession) probe(st *plugins.Statement) bool {
	if rs.known || rs.failed {
		return rs.known
	}
	if st.Backend == nil {
		return false
	}
	r, err := st.Backend.Query(resultSettingsQuery)
	if err != nil {
		rs.failed = true
		return false
	}
	defer r.Close()
	if r.RowNumber() != 1 || eval.ResultString(r, 0, 0) != "0" {
		rs.failed = true
		return false
	}
	var b []byte
	for i := 1; i < len(r.Fields); i++ {
		b = appendKeyField(b, eval.ResultString(r, 0, i))
	}
	rs.settings, rs.known = string(b), true
	return true
}

// appendKeyField appends s, length first, so that no two different lists
// of fields encode alike.
func appendKeyField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendParamsKey appends a COM_STMT_EXECUTE's parameters: the types in
// force, the NULL bitmap and the values, as sent. It fails for an
// execution that opens a cursor (its rows come through COM_STMT_FETCH) or
// a parameter block it cannot split.
func appendParamsKey(b []byte, st *plugins.Statement) ([]byte, bool) {
	p, n := st.Params, st.ParamCount
	if len(p) < 5 || p[0] != 0 || st.LongData {
		return b, false
	}
	if n == 0 {
		return appendKeyField(b, ""), true
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
	b = appendKeyField(b, unsafe.String(unsafe.SliceData(st.ParamTypes), len(st.ParamTypes)))
	b = appendKeyField(b, unsafe.String(unsafe.SliceData(p[5:bitmap]), bitmap-5))
	return appendKeyField(b, unsafe.String(unsafe.SliceData(p[vals:]), len(p)-vals)), true
}

// declined handles a SELECT the evaluator does not answer: from the result
// cache if it can, else by the backend (recording the answer when it may
// be stored). The reads of cached tables that reach the backend are
// counted as passes.
func (p *Plugin) declined(st *plugins.Statement, si *sessionInfo, shape *resultShape, tables []lease.TableID) plugins.Action {
	a, hit := p.fromResults(st, si, shape)
	if !hit {
		p.countPassesOf(tables)
	}
	return a
}

// declinedWhy is declined for readWhy, with the reason it records for
// EXPLAIN LAST STATEMENT.
func (p *Plugin) declinedWhy(st *plugins.Statement, si *sessionInfo, ent *planEntry, why eval.Why) (plugins.Action, eval.Why) {
	a := p.declined(st, si, ent.results, ent.tables)
	if a.Verdict == plugins.Answer {
		return a, eval.Because(why.Reason, "answered from the result cache (not by the evaluator: "+why.Text+")")
	}
	return a, why
}

// fromResults answers st from the result cache (hit), or returns the
// action to send it on with.
func (p *Plugin) fromResults(st *plugins.Statement, si *sessionInfo, shape *resultShape) (plugins.Action, bool) {
	rc := p.results
	if rc == nil || shape == nil {
		return plugins.Continue, false
	}
	if shape.reparse {
		if st.Command != plugins.ComQuery {
			return plugins.Continue, false // the same text again
		}
		if shape = p.reparseShape(st); shape == nil {
			return plugins.Continue, false
		}
	}
	si.usesTables = true
	for _, id := range shape.tables {
		if !p.mayServe(st, si, id) {
			// The common case while the tables are written: skip the
			// session checks and the key.
			return plugins.Continue, false
		}
	}
	tss := make([]*tableState, len(shape.tables))
	for i, id := range shape.tables {
		if tss[i] = p.table(id); tss[i] == nil {
			return plugins.Continue, false // reads a table that is not cached
		}
	}
	rs := &si.rc
	si.usesTables = true
	if si.blocked(st).Declined() || !si.probe(st) || !rs.probe(st) || !parsedAlike(st.SQL, si.sqlMode) {
		return plugins.Continue, false
	}
	if !st.InTx && !st.Tx.Autocommit() {
		// With autocommit off the read starts a transaction in the
		// backend, at the backend's newest data: as the evaluator, leave
		// it to the backend.
		return plugins.Continue, false
	}
	binaryProto := st.Command == plugins.ComStmtExecute
	key := rs.key[:0]
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
	key = appendKeyField(key, st.User)
	key = appendKeyField(key, st.DB)
	key = appendKeyField(key, si.settings)
	key = appendKeyField(key, rs.settings)
	key = appendKeyField(key, st.SQL)
	if binaryProto {
		var ok bool
		if key, ok = appendParamsKey(key, st); !ok {
			rs.key = key
			return plugins.Continue, false
		}
	}
	versions := make([]lease.Version, len(shape.tables))
	for i, id := range shape.tables {
		ts := tss[i]
		var snap *eval.Snapshot
		var ok bool
		if st.InTx {
			snap, ok = p.txSnapshot(st, si, id)
		} else {
			snap, ok = p.Servable(id)
		}
		if !ok || !timeSafe(snap, shape) {
			rs.key = key
			return plugins.Continue, false
		}
		versions[i] = snap.Version
		key = appendKeyField(key, id.Schema)
		key = appendKeyField(key, id.Table)
		key = binary.AppendUvarint(key, ts.gen)
		key = binary.AppendUvarint(key, uint64(snap.Version))
		key = binary.AppendUvarint(key, snap.Epoch) // see tableState.epoch
	}
	rs.key = key
	k := unsafe.String(unsafe.SliceData(key), len(key))
	if e, ok := rc.store.Get(k); ok && e.key == k {
		rc.hits.Add(1)
		for _, ts := range tss {
			ts.hits.Add(1)
			ts.resultHits.Add(1)
		}
		return plugins.AnswerWith(plugins.ResponderFunc(e.replay)), true
	}
	rc.misses.Add(1)
	// Only an answer read outside a transaction, at an isolation level
	// that reads committed rows, stands for the tables' versions: inside
	// one the backend answers from the transaction's read view, which may
	// be older; READ UNCOMMITTED may see rows a transaction later rolls
	// back; and after SET TRANSACTION the next statement's isolation is
	// unknown.
	if st.InTx || st.Tx.NextTxPending() {
		return plugins.Continue, false
	}
	if iso := st.Tx.Isolation(); strings.EqualFold(iso, "READ-UNCOMMITTED") || iso == "" {
		return plugins.Continue, false
	}
	pend := &pendingResult{key: string(key), tables: tss, versions: versions}
	pend.capture.Full, pend.capture.MaxBytes = true, rc.maxEntry
	rs.pending = pend
	return plugins.Action{Verdict: plugins.Pass, Capture: &pend.capture}, false
}

// mayServe is false when table id surely cannot answer st from memory now:
// a write to it is in flight, or st's transaction pinned it while it could
// not be served (a table no longer cached is caught by the caller's next
// look-up). It changes nothing (txSnapshot pins).
func (p *Plugin) mayServe(st *plugins.Statement, si *sessionInfo, id lease.TableID) bool {
	if p.shadowed(st, si, id) {
		return false
	}
	if st.InTx {
		s, pinned := si.pins[id]
		return !pinned || s != nil
	}
	_, ok := p.Servable(id)
	return ok
}

// parsedAlike reports whether the backend reads sql as the parser that
// decided its eligibility did. MariaDB runs the text of /*M! ... */
// comments, which the parser skips (a NOW() there would go unseen); and
// the parser reads quotes and backslashes as the default SQL mode does.
func parsedAlike(sql, sqlMode string) bool {
	return !plugins.HidesCode(sql) && !strings.Contains(sqlMode, "ANSI_QUOTES") &&
		!strings.Contains(sqlMode, "NO_BACKSLASH_ESCAPES") && !strings.Contains(sqlMode, "ORACLE")
}

// reparseShape decides eligibility on a statement's full text.
func (p *Plugin) reparseShape(st *plugins.Statement) *resultShape {
	stmts, err := st.Parsed()
	if err != nil || len(stmts) != 1 || plugins.CallsUserFunction(stmts[0]) {
		return nil
	}
	return resultShapeOf(stmts[0], st.DB)
}

// resultsAfter is the result cache's part of OnResult: store the answer
// recorded for the session's statement if its guard holds, and forget the
// session's settings after a statement that may change them.
func (p *Plugin) resultsAfter(si *sessionInfo, st *plugins.Statement, out *plugins.Outcome) {
	rs := &si.rc
	if settingsChanged(st.Kind) || st.Command == plugins.ComQuery && !plugins.SingleStatement(st.SQL) {
		// A request of several statements may hide a SET behind a SELECT;
		// the evaluator's settings are part of the key too.
		rs.known, rs.failed = false, false
		si.known = false
	}
	pend := rs.pending
	if pend == nil {
		return
	}
	rs.pending = nil
	if p.storeResult(pend, out) {
		p.results.stores.Add(1)
	} else {
		p.results.rejects.Add(1)
	}
}

// storeResult stores a recorded answer if it is one complete result set
// without warnings, and every table it read is still servable at the
// version it had before the statement was sent.
func (p *Plugin) storeResult(pend *pendingResult, out *plugins.Outcome) bool {
	c := &pend.capture
	if out.Source != plugins.FromBackend || out.Err != nil || out.Warnings != 0 || c.Truncated || c.Results != 1 {
		return false
	}
	e, ok := newResultEntry(pend.key, c)
	if !ok {
		return false
	}
	if !p.bypassWritesVisible() {
		return false
	}
	for i, ts := range pend.tables {
		if p.table(ts.entry.ID()) != ts {
			return false // NOCACHE (and maybe CACHE again) meanwhile
		}
		if v, ok := ts.servable(); !ok || v != pend.versions[i] {
			return false // written meanwhile, or being written now
		}
	}
	return p.results.store.Set(e.key, e, e.cost())
}

// newResultEntry checks that a recorded response is exactly one result
// set (column count, definitions, EOF, rows, EOF) with no warnings, no
// cursor and no more results, and builds its entry.
func newResultEntry(key string, c *plugins.Capture) (*resultEntry, bool) {
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
	e := &resultEntry{key: key, mid: int32(mid), final: int32(final), midStatus: midStatus, endStatus: endStatus,
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
func (e *resultEntry) replay(w plugins.ResponseWriter) error {
	start := int32(0)
	for i, end := range e.ends {
		var err error
		switch int32(i) {
		case e.mid:
			err = writeEOF(w, e.midStatus, nil)
		case e.final:
			err = writeEOF(w, e.endStatus, nil)
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

// resultCacheSizes reads the result cache's budget and entry cap from the
// options (a budget of 0 turns the cache off).
func resultCacheSizes(opts Options) (budget, maxEntry int64, err error) {
	size, entry := opts.ResultCacheSize, opts.ResultCacheEntryMax
	if size == "" {
		size = "64MB"
	}
	if entry == "" {
		entry = "1MB"
	}
	if budget, err = configs.ParseByteSize(size); err != nil || budget < 0 {
		return 0, 0, fmt.Errorf("result_cache_size: %q: want a size like 64MB, or 0 for none", size)
	}
	// Packets are recorded whole; one of 16 MB or more would be split.
	if maxEntry, err = configs.ParseByteSize(entry); err != nil || maxEntry <= 0 || maxEntry >= int64(mysql.MaxPayloadLen) {
		return 0, 0, fmt.Errorf("result_cache_entry_max: %q: want a size like 1MB, below 16MB", entry)
	}
	return budget, maxEntry, nil
}

// newResultCacheFor builds the result cache the options ask for, or nil.
func newResultCacheFor(log *slog.Logger, opts Options) *resultCache {
	budget, maxEntry, err := resultCacheSizes(opts)
	if err != nil || budget == 0 {
		return nil
	}
	rc, err := newResultCache(budget, min(maxEntry, budget))
	if err != nil {
		log.Warn("cache: no result cache", "err", err)
		return nil
	}
	return rc
}

// resultMetrics are the result cache's counters.
func (p *Plugin) resultMetrics() []prometheus.Collector {
	rc := p.results
	if rc == nil {
		return nil
	}
	counter := func(name, help string, c *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(c.Load()) })
	}
	return []prometheus.Collector{
		counter("tableproxy_cache_result_hits_total", "Reads answered from the result cache.", &rc.hits),
		counter("tableproxy_cache_result_misses_total", "Eligible reads the result cache had no answer for.", &rc.misses),
		counter("tableproxy_cache_result_stores_total", "Answers stored in the result cache.", &rc.stores),
		counter("tableproxy_cache_result_rejections_total",
			"Recorded answers not stored (warnings, errors, too large, a table written meanwhile, or no room).", &rc.rejects),
	}
}
