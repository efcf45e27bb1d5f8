package eval

// PassReason is why a statement was not answered from memory: one value
// per distinct cause, with a short stable label (String) for metrics and
// tests. The text EXPLAIN LAST STATEMENT shows goes with it in a Why.
type PassReason uint8

const (
	// NoReason: nothing kept the statement from memory.
	NoReason              PassReason = iota
	NotSelect                        // a statement other than SELECT
	NothingCached                    // no table is cached at all
	NoCachedTable                    // the statement reads no cached table
	TableNotCached                   // a table it reads is not (or no longer) cached
	TableLoading                     // a cached table it reads has no copy loaded yet
	OpensCursor                      // an execute that opens a cursor
	StoredFunction                   // it calls a stored function, which may write
	MariaDBComment                   // a /*M! ... */ comment the proxy does not read
	ExecutableComment                // a /*! ... */ comment the backend reads by version
	ParseFailed                      // not one statement the parser reads
	NotPlainSelect                   // UNION, TABLE, VALUES, or a clause left to the backend
	CalcFoundRows                    // SQL_CALC_FOUND_ROWS
	UnsupportedJoin                  // a join of a kind or shape not covered
	UnsupportedExpression            // a select expression, condition, LIMIT or marker not covered
	UnsupportedAggregate             // an aggregate, GROUP BY or DISTINCT shape not covered
	UnsupportedOrder                 // an ORDER BY not covered, or a needed one missing
	TableLocks                       // the session holds LOCK TABLES
	Diagnostics                      // the backend's last answer left warnings or an error
	TemporaryTable                   // a temporary table of the same name may hide the table
	InTransactionBackend             // the transaction reads the table from the backend
	StaleCopy                        // the table's newest version is not in memory
	LayoutChanged                    // the table's columns changed since planning
	ParamsMismatch                   // the parameters or literals do not match the plan
	ParamType                        // a parameter or literal of a type not compared here
	SessionUnknown                   // the session's settings could not be read
	SessionEncoding                  // values would be sent otherwise in this session
	SessionCharset                   // the session's character set is not ASCII-compatible
	AutocommitOff                    // autocommit is off outside a transaction
	SQLModeParse                     // sql_mode changes how statements parse
	SQLModeValues                    // sql_mode changes values in results
	SelectLimit                      // sql_select_limit or max_join_size applies
	LimitZero                        // LIMIT 0 on a shape not learned yet
	LearningMetadata                 // the first execution of a shape: metadata to learn
	TooManyRows                      // more rows to examine or pair than the evaluator scans
	BadLimit                         // LIMIT or OFFSET negative or NULL
	UnreadableRow                    // a stored row or value could not be decoded
	InexactString                    // a string could not be compared or sorted exactly
	OrderTies                        // rows tie in the ORDER BY
	CollationTies                    // values equal by collation but not byte for byte
	ArithmeticOverflow               // integer arithmetic overflows or is not covered
	InexactAggregate                 // an aggregate's value could not be computed exactly
	TextTooLong                      // the statement is longer than the longest text planned
	QueryLimit                       // the account has a MAX_QUERIES_PER_HOUR limit
	NumReasons
)

var reasonLabels = [NumReasons]string{
	NoReason:              "none",
	NotSelect:             "not_select",
	NothingCached:         "nothing_cached",
	NoCachedTable:         "no_cached_table",
	TableNotCached:        "table_not_cached",
	TableLoading:          "table_loading",
	OpensCursor:           "opens_cursor",
	StoredFunction:        "stored_function",
	MariaDBComment:        "mariadb_comment",
	ExecutableComment:     "executable_comment",
	ParseFailed:           "parse_failed",
	NotPlainSelect:        "not_plain_select",
	CalcFoundRows:         "calc_found_rows",
	UnsupportedJoin:       "unsupported_join",
	UnsupportedExpression: "unsupported_expression",
	UnsupportedAggregate:  "unsupported_aggregate",
	UnsupportedOrder:      "unsupported_order",
	TableLocks:            "table_locks",
	Diagnostics:           "diagnostics",
	TemporaryTable:        "temporary_table",
	InTransactionBackend:  "in_transaction_backend",
	StaleCopy:             "stale_copy",
	LayoutChanged:         "layout_changed",
	ParamsMismatch:        "params_mismatch",
	ParamType:             "param_type",
	SessionUnknown:        "session_unknown",
	SessionEncoding:       "session_encoding",
	SessionCharset:        "session_charset",
	AutocommitOff:         "autocommit_off",
	SQLModeParse:          "sql_mode_parse",
	SQLModeValues:         "sql_mode_values",
	SelectLimit:           "select_limit",
	LimitZero:             "limit_zero",
	LearningMetadata:      "learning_metadata",
	TooManyRows:           "too_many_rows",
	BadLimit:              "bad_limit",
	UnreadableRow:         "unreadable_row",
	InexactString:         "inexact_string",
	OrderTies:             "order_ties",
	CollationTies:         "collation_ties",
	ArithmeticOverflow:    "arithmetic_overflow",
	InexactAggregate:      "inexact_aggregate",
	TextTooLong:           "text_too_long",
	QueryLimit:            "query_limit",
}

// String is the reason's label: snake_case, stable, a metric label value.
func (r PassReason) String() string {
	if r < NumReasons {
		return reasonLabels[r]
	}
	return "unknown"
}

// PassReasons lists every reason but NoReason, in order.
func PassReasons() []PassReason {
	out := make([]PassReason, 0, NumReasons-1)
	for r := NoReason + 1; r < NumReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Why is a reason with the words EXPLAIN LAST STATEMENT shows for it. The
// zero Why says nothing kept the statement from memory.
type Why struct {
	Reason PassReason
	Text   string
}

// Because is a Why of reason r, told as text.
func Because(r PassReason, text string) Why { return Why{Reason: r, Text: text} }

// Declined reports whether w names a reason.
func (w Why) Declined() bool { return w.Reason != NoReason }
