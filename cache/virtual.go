package cache

import (
	"fmt"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/cache/eval"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Tables the proxy provides itself (its virtual schema, which package
// vschema owns) are answered by the evaluator of cached reads: each is a
// small snapshot built per statement from the table's rows. What the
// evaluator does not cover is refused with 1235, never sent to the
// backend, which has no such tables.

// Snapshot is a table in memory (see eval.Snapshot): the virtual tables'
// callers build theirs with NewVirtualSnapshot.
type Snapshot = eval.Snapshot

// virtualSchema is the virtual schema's name.
const virtualSchema = "tableproxy"

// virtualCollation is how the virtual tables' strings compare: by their
// bytes, as their declared collation utf8mb4_bin does (without its
// trailing-space padding).
var virtualCollation = func() *eval.Collation {
	c := &eval.Collation{Name: "utf8mb4_bin", Charset: "utf8mb4", Binary: true}
	c.Learned.Store(&map[rune][]byte{})
	return c
}()

// virtualEnv is what a run over virtual tables assumes of the session,
// which the proxy does not ask the backend about for them: a utf8mb4
// client, and the backend's defaults for AVG's scale and the sort length.
var virtualEnv = eval.RunEnv{ASCIIArgs: true, UTF8Args: true, DefaultParse: true, TZFixed: true,
	DivPrecision: 4, MaxSortLength: 1024, PlainValues: true}

// NewVirtualSnapshot returns a snapshot of a table the proxy provides:
// its columns in order, BIGINT where numeric says and VARCHAR otherwise,
// and rows of int64 (or other integer), string and nil (NULL) values.
func NewVirtualSnapshot(schema, table string, columns []string, numeric map[string]bool, rows [][]any) *eval.Snapshot {
	s := &eval.Snapshot{ID: lease.TableID{Schema: schema, Table: table}, AnyOrder: true}
	s.Colls = make([]*eval.Collation, len(columns))
	for i, c := range columns {
		s.Fields = append(s.Fields, virtualField(schema, table, c, numeric[c]))
		if !numeric[c] {
			s.Colls[i] = virtualCollation
		}
	}
	s.Rows = make([][]byte, len(rows))
	for i, row := range rows {
		var b []byte
		for j := range columns {
			var v []byte
			if j < len(row) {
				v = virtualValue(row[j])
			}
			if v == nil {
				b = append(b, 0xfb)
				continue
			}
			b = mysqlwire.AppendLenEncBytes(b, v)
		}
		s.Rows[i] = b
	}
	s.BuildIndexes()
	s.ScanCharsets()
	s.ReserveStringIndexes()
	s.Layout = eval.LayoutOf(s)
	return s
}

// virtualValue is a virtual table's value as the text protocol prints
// it; nil for NULL.
func virtualValue(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return append([]byte{}, x...)
	case []byte:
		return append([]byte{}, x...)
	case int64:
		return strconv.AppendInt([]byte{}, x, 10)
	case int:
		return strconv.AppendInt([]byte{}, int64(x), 10)
	case uint64:
		return strconv.AppendUint([]byte{}, x, 10)
	case bool:
		if x {
			return []byte("1")
		}
		return []byte("0")
	}
	return []byte(fmt.Sprint(v))
}

// SelectVirtual answers sel, a SELECT of tables lookup finds (snapshots
// from NewVirtualSnapshot), for statement st (text or binary protocol):
// the responder that writes its result, or the error to refuse it with
// (1235 naming what the evaluator does not cover).
func SelectVirtual(sel *ast.SelectStmt, db string, lookup func(lease.TableID) *eval.Snapshot, st *plugins.Statement) (plugins.Responder, *mysql.MyError) {
	pl, snap, why := eval.BuildPlan(sel, db, lookup)
	if pl == nil {
		return nil, notSupported(why.Text)
	}
	var args []eval.Arg
	binaryProto := st.Command == plugins.ComStmtExecute
	if binaryProto {
		var ok bool
		if pl.NParams != st.ParamCount {
			return nil, notSupported("a parameter marker is in a place the evaluator does not cover")
		}
		if args, ok = eval.DecodeParams(st.Params, st.ParamCount, st.ParamTypes, nil); !ok {
			return nil, notSupported("a parameter of this type (integers and strings are covered)")
		}
	} else if pl.NParams != 0 {
		return nil, notSupported("parameter markers outside a prepared statement")
	}
	if !pl.ArgsMatch(args) {
		return nil, notSupported("a string compared with a BIGINT column, or a number with a VARCHAR column")
	}
	if pl.Join != nil {
		a, b := lookup(pl.Tables[0]), lookup(pl.Tables[1])
		joined, why := pl.JoinRows(a, b, args, virtualEnv)
		if why.Declined() {
			return nil, notSupported(why.Text)
		}
		snap = eval.JoinSnapshot(a, b, joined)
	}
	rows, why := pl.Run((&eval.RowCtx{}).Reuse(snap, args, virtualEnv), nil)
	if why.Declined() {
		return nil, notSupported(why.Text)
	}
	meta := composedMeta(resultFields(pl, snap), st.ExtendedMetadata)
	resp, why := answer(pl, snap, rows, args, virtualEnv, meta, binaryProto, &servingScratch{})
	if why.Declined() {
		return nil, notSupported(why.Text)
	}
	return resp, nil
}

// VirtualColumns plans sel as SelectVirtual would, without running it:
// the names of its result columns, so that a prepare can describe them,
// or the error SelectVirtual would answer with. params is how many
// parameter markers the statement has.
func VirtualColumns(sel *ast.SelectStmt, db string, lookup func(lease.TableID) *eval.Snapshot, params int) ([]string, *mysql.MyError) {
	pl, snap, why := eval.BuildPlan(sel, db, lookup)
	if pl == nil {
		return nil, notSupported(why.Text)
	}
	if pl.NParams != params {
		return nil, notSupported("a parameter marker is in a place the evaluator does not cover")
	}
	if pl.Join != nil {
		snap = eval.JoinSnapshot(lookup(pl.Tables[0]), lookup(pl.Tables[1]), nil)
	}
	fields := resultFields(pl, snap)
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = string(f.Name)
	}
	return names, nil
}

func notSupported(what string) *mysql.MyError { return VirtualUnsupported(what) }

// VirtualUnsupported is the error (1235) for what the proxy does not
// answer over its virtual schema.
func VirtualUnsupported(what string) *mysql.MyError {
	return mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, "This version of tableproxy doesn't yet support this over the tableproxy schema: "+what)
}

// resultFields are the definitions of the plan's result columns over
// virtual tables, typed as the backend types them: a column as it is
// (under the name it is selected as), COUNT and arithmetic a BIGINT, SUM
// a DECIMAL without fraction, AVG one with 4 digits of fraction, MIN and
// MAX the column's type.
func resultFields(p *eval.Plan, snap *eval.Snapshot) []*mysql.Field {
	fields := make([]*mysql.Field, len(p.Items))
	for i, it := range p.Items {
		var f mysql.Field
		switch {
		case it.Col >= 0:
			f = *snap.Fields[it.Col]
		case it.Expr != nil:
			f = mysql.Field{Type: mysql.MYSQL_TYPE_LONGLONG, Charset: charsetBinary, ColumnLength: 21,
				Flag: mysql.BINARY_FLAG | mysql.NUM_FLAG}
		default:
			switch g := p.Aggs[it.Agg]; g.Fn {
			case "count":
				f = mysql.Field{Type: mysql.MYSQL_TYPE_LONGLONG, Charset: charsetBinary, ColumnLength: 21,
					Flag: mysql.NOT_NULL_FLAG | mysql.BINARY_FLAG | mysql.NUM_FLAG}
			case "sum", "avg":
				f = mysql.Field{Type: mysql.MYSQL_TYPE_NEWDECIMAL, Charset: charsetBinary, ColumnLength: 42,
					Flag: mysql.BINARY_FLAG | mysql.NUM_FLAG}
				if g.Fn == "avg" {
					f.Decimal, f.ColumnLength = uint8(virtualEnv.DivPrecision), 25
				}
			default:
				f = *snap.Fields[g.Col]
				f.Schema, f.Table, f.OrgTable, f.OrgName = nil, nil, nil, nil
			}
		}
		f.Name = []byte(it.Name)
		fields[i] = &f
	}
	return fields
}

// CachedTables is tableproxy.cached_tables: every cached table, its state
// and counters.
type CachedTables struct{ p *Plugin }

// CachedTables returns the plugin's tableproxy.cached_tables.
func (p *Plugin) CachedTables() CachedTables { return CachedTables{p} }

// Columns names the table's columns.
func (CachedTables) Columns() []string {
	return []string{"schema_name", "table_name", "state", "row_count", "memory_bytes", "version",
		"loaded_at", "load_ms", "hits", "pass_throughs", "invalidation", "error", "result_hits", "stale_reason", "missed_writes"}
}

// Numeric marks the BIGINT columns; the others are VARCHAR.
func (CachedTables) Numeric() map[string]bool {
	return map[string]bool{"row_count": true, "memory_bytes": true, "version": true,
		"load_ms": true, "hits": true, "pass_throughs": true, "result_hits": true, "missed_writes": true}
}

// Rows lists the cached tables; loaded_at is UTC, "" before the first load.
func (t CachedTables) Rows() [][]any {
	var rows [][]any
	for _, s := range t.p.Tables() {
		loaded := ""
		if !s.LoadedAt.IsZero() {
			loaded = s.LoadedAt.UTC().Format("2006-01-02 15:04:05.000000")
		}
		rows = append(rows, []any{s.Schema, s.Table, s.State, int64(s.Rows), s.Bytes, int64(s.Version),
			loaded, s.LoadDuration.Milliseconds(), int64(s.Hits), int64(s.Passes), s.Invalidation, s.Error,
			int64(s.ResultHits), s.StaleReason, int64(s.MissedWrites)})
	}
	return rows
}

// LastStatement is tableproxy.last_statement: the session's statement
// before this one, and whether and why it was answered in memory (as
// EXPLAIN LAST STATEMENT shows it).
type LastStatement struct{}

// LastStatement returns the plugin's tableproxy.last_statement.
func (p *Plugin) LastStatement() LastStatement { return LastStatement{} }

// Columns names the table's columns.
func (LastStatement) Columns() []string { return lastStatementColumns }

// Numeric marks no column: they are all VARCHAR.
func (LastStatement) Numeric() map[string]bool { return nil }

// SessionRows is the one row of st's session.
func (LastStatement) SessionRows(st *plugins.Statement) [][]any {
	return [][]any{session(st).last.row()}
}
