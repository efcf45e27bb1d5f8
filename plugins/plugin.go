package plugins

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"

	"tableproxy/internal/sqllex"
)

// Plugin is the part every plugin has. A plugin takes part in the chain by
// also implementing one or more of StatementFilter, StatementObserver and
// ConnObserver.
type Plugin interface {
	Name() string
}

// StatementFilter sees a statement before it is executed. It may refuse a
// COM_STMT_PREPARE but not answer one (a prepared statement lives on the
// backend); the proxy passes such an answer on to the backend instead.
type StatementFilter interface {
	Plugin
	OnStatement(st *Statement) Action
}

// StatementObserver is told how a statement ended, whoever answered it.
// The proxy reuses out for the session's next statement: an observer that
// needs its fields later copies them.
type StatementObserver interface {
	Plugin
	OnResult(st *Statement, out *Outcome)
}

// ConnObserver is told about client connections.
type ConnObserver interface {
	Plugin
	OnConn(ev ConnEvent)
}

// Closer is implemented by plugins that hold resources (files, listeners).
type Closer interface {
	Close() error
}

// Drainer is implemented by plugins whose work can keep a session waiting
// for long (a DDL job's client waits for the whole job). Drain is called
// once, when the proxy begins to shut down and before it waits for the
// sessions to end: the plugin stops such work now, in a way its next start
// takes up again, so that the waiting sessions get their answer within the
// shutdown timeout.
type Drainer interface {
	Drain()
}

// Shedder is implemented by plugins that keep what they can rebuild from
// use (plans, learned metadata, cached answers). Shed drops it: the proxy
// calls it when its live heap nears memory_limit, rather than grow.
type Shedder interface {
	Shed()
}

// Command is the protocol command that carried a statement.
type Command uint8

// The commands a Statement can come from (their MySQL wire values).
const (
	ComQuery       Command = Command(mysql.COM_QUERY)
	ComStmtPrepare Command = Command(mysql.COM_STMT_PREPARE)
	ComStmtExecute Command = Command(mysql.COM_STMT_EXECUTE)
)

func (c Command) String() string {
	switch c {
	case ComQuery:
		return "query"
	case ComStmtPrepare:
		return "prepare"
	case ComStmtExecute:
		return "execute"
	}
	return fmt.Sprintf("command(%d)", uint8(c))
}

// Statement is what the chain sees of one client request. The proxy reuses
// one Statement per session, and SQL points into the session's packet
// buffer, which the next command overwrites: a plugin must not keep the
// Statement, its SQL, or any substring of it (parsers return substrings)
// after its hook returns; copy what it needs (strings.Clone).
type Statement struct {
	ConnID uint32   // the connection id the client sees
	User   string   // the proxy user the session authenticated as
	Admin  bool     // the user may run the proxy's admin SQL
	Remote net.Addr // the client's address
	// DB is the database unqualified names resolve against, as far as the
	// proxy knows it: the current one, or for COM_STMT_EXECUTE the one that
	// was current when the statement was prepared (the server keeps that).
	DB      string
	Command Command
	SQL     string // statement text; for COM_STMT_EXECUTE the prepared text
	Kind    Kind   // cheap lexical classification of SQL
	InTx    bool   // the backend reported an open transaction before this statement
	// Tx is the proxy's account of the session's transaction and of the
	// settings that decide how one runs (see TxView).
	Tx TxView
	// Begin: a filter asks the proxy to start a transaction on the
	// backend before this statement. When the statement goes to the
	// backend, BEGIN is sent with it, in the same round trip; when a
	// plugin answers or refuses it, BEGIN is sent alone first. Only for a
	// statement that changes nothing outside a transaction (a plain
	// read): should BEGIN fail, the statement has run anyway, its result
	// is discarded, and the client gets BEGIN's error.
	Begin bool
	// ExtendedMetadata: the client negotiated MariaDB's extended column
	// metadata (column definitions carry one more field).
	ExtendedMetadata bool
	// Dialect is the backend's flavor and version, which decide what its
	// executable comments run (see Kind and Analysis).
	Dialect sqllex.Dialect
	// NoBackslashEscapes: the session's sql_mode has NO_BACKSLASH_ESCAPES,
	// as the backend's last status said (a backslash in a string is a
	// character, not an escape).
	NoBackslashEscapes bool

	// Params is the raw parameter block of a COM_STMT_EXECUTE (everything
	// after the statement id), ParamCount how many parameters the
	// statement has, and ParamTypes the types (two bytes each) in force,
	// which the client sends only when they change.
	Params     []byte
	ParamCount int
	ParamTypes []byte
	// LongData: the client has sent a parameter of this prepared statement
	// with COM_STMT_SEND_LONG_DATA, so Params does not hold every value.
	LongData bool

	// Session is storage that lives as long as the client session, for
	// plugins that keep per-session state. It is replaced by an empty one
	// when the session's state is reset (COM_CHANGE_USER,
	// COM_RESET_CONNECTION).
	Session *SessionState
	// Backend runs a query on the session's own backend connection, between
	// statements (to read session variables, for instance). Each call costs
	// a round trip to the backend.
	Backend SessionBackend

	normalized string
	digest     string
	memo       *Memo

	tree        Parsed // when parsed: see Parsed
	parsed      bool
	analysis    Analysis
	analysisErr error
	analyzed    bool
}

// TxView is the proxy's account of a session's transaction and of the
// settings that decide how one runs. The proxy alone keeps it, from the
// status flags the backend reports, the statements it relays and their
// outcome, and what it reads from the backend when that is not enough;
// plugins read it. During OnStatement it is the state the statement starts
// in; during OnResult, the state the statement left. Plugin state of one
// transaction is keyed by Seq, never by following BEGIN and COMMIT again.
type TxView interface {
	// Seq identifies the session's current transaction: it changes when a
	// transaction ends, when a lone BEGIN, COMMIT or ROLLBACK starts
	// afresh (a BEGIN inside a transaction commits it; COMMIT AND CHAIN
	// begins the next), and when the session's state is reset.
	Seq() uint64
	// Opaque: the current transaction ran something whose effect on it
	// the proxy does not follow (a savepoint or ROLLBACK TO, SET, DDL, XA,
	// a CALL, several statements in one request). It ends with Seq.
	Opaque() bool
	// Since is the proxy's transaction clock (see Transactions) when the
	// session's current transaction began: as of the arrival of its first
	// statement, whoever answered it.
	Since() uint64
	// Autocommit reports the session's autocommit (SERVER_STATUS_AUTOCOMMIT).
	Autocommit() bool
	// Isolation is the session's isolation level as the server names it
	// ("REPEATABLE-READ", "READ-COMMITTED", ...), or "" when it cannot be
	// read. It may cost a round trip to the backend, once after a
	// statement that may have changed it in a way the proxy cannot read.
	Isolation() string
	// NextTxPending: SET TRANSACTION was run, so the next transaction may
	// not run as the session's settings say. It clears when a
	// transaction ends.
	NextTxPending() bool
	// PlainCompletion reports whether completion_type is NO_CHAIN, so that
	// COMMIT and ROLLBACK only end the transaction; known is false when it
	// cannot be read. Like Isolation, it may cost a round trip.
	PlainCompletion() (plain, known bool)
	// TableLocks: the session holds table locks (LOCK TABLES, FLUSH
	// TABLES WITH READ LOCK), so the backend decides which tables it may
	// read, and BEGIN releases them there.
	TableLocks() bool
}

// SessionBackend is the session's backend connection, as plugins may use it.
type SessionBackend interface {
	Query(sql string) (*mysql.Result, error)
}

// SessionState is per-session storage for plugins, keyed by any comparable
// value a plugin owns (use an unexported type to avoid collisions). A
// session runs one statement at a time, so it needs no locking.
type SessionState struct {
	values map[any]any
}

// Get returns the value stored under key, or nil.
func (s *SessionState) Get(key any) any {
	if s == nil {
		return nil
	}
	return s.values[key]
}

// Set stores v under key.
func (s *SessionState) Set(key, v any) {
	if s.values == nil {
		s.values = map[any]any{}
	}
	s.values[key] = v
}

// Memo keeps what is derived from a statement's text (kind, digest,
// analysis) across executions of one prepared statement, so it is computed
// once.
type Memo struct {
	kind        Kind
	classified  bool
	normalized  string
	digest      string
	analysis    Analysis
	analysisErr error
	analyzed    bool
}

// Reset prepares st for a new statement, keeping the session fields.
func (st *Statement) Reset(cmd Command, sql string) {
	st.Command = cmd
	st.SQL = sql
	st.Kind = ClassifyFor(sql, st.Dialect)
	st.normalized = ""
	st.digest = ""
	st.memo = nil
	st.forgetDerived()
}

// forgetDerived clears what belonged to the statement before.
func (st *Statement) forgetDerived() {
	st.Release()
	if st.analyzed {
		st.analysis, st.analysisErr, st.analyzed = Analysis{}, nil, false
	}
	st.Params, st.ParamCount, st.ParamTypes, st.LongData = nil, 0, nil, false
	st.Begin = false
}

// ResetMemo is Reset for a statement whose derived values are kept in m
// (the proxy keeps one Memo per prepared statement).
func (st *Statement) ResetMemo(cmd Command, sql string, m *Memo) {
	if !m.classified {
		m.kind, m.classified = ClassifyFor(sql, st.Dialect), true
	}
	st.Command = cmd
	st.SQL = sql
	st.Kind = m.kind
	st.normalized = m.normalized
	st.digest = m.digest
	st.memo = m
	st.forgetDerived()
}

// Normalized returns the statement with literals replaced by '?' and
// whitespace and case folded (TiDB's digest normalization). It is computed on
// first use (about 1 µs) and cached for the rest of the statement.
func (st *Statement) Normalized() string {
	st.computeDigest()
	return st.normalized
}

// Digest returns the hex digest of the normalized statement: statements that
// differ only in literals share it.
func (st *Statement) Digest() string {
	st.computeDigest()
	return st.digest
}

func (st *Statement) computeDigest() {
	if st.digest != "" {
		return
	}
	text := st.SQL
	if strings.IndexByte(text, '\\') >= 0 {
		text = blankQuoted(text, !st.NoBackslashEscapes)
	}
	norm, d := parser.NormalizeDigest(text)
	st.normalized = norm
	st.digest = d.String()
	if st.memo != nil {
		st.memo.normalized, st.memo.digest = st.normalized, st.digest
	}
}

// blankQuoted is sql with what is quoted in it (strings, and
// double-quoted texts) made empty strings, for the digest normalizer, which reads
// backslashes in quotes as escapes. Where the session reads them as
// characters (NO_BACKSLASH_ESCAPES, or a double-quoted identifier under
// ANSI_QUOTES), the normalizer given 'a\' or "a\" would read on past its
// end and keep what follows, the user's literals among it, as text.
// Whether the session is under ANSI_QUOTES is not known (no status flag
// shows it): where the two readings quote different stretches, every
// stretch either quotes is blanked. Literals become '?' anyway.
func blankQuoted(sql string, backslashEscapes bool) string {
	plain := sqllex.Tokens(sql, backslashEscapes)
	ansi := sqllex.TokensANSIQuotes(sql, backslashEscapes)
	var spans [][2]int
	for _, toks := range [][]sqllex.Token{plain, ansi} {
		for _, t := range toks {
			if t.Kind == sqllex.String || t.Kind == sqllex.Ident && sql[t.Start] == '"' {
				spans = append(spans, [2]int{t.Start, t.End})
			}
		}
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		start, end := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] < end; i++ {
			end = max(end, spans[i][1]) // (overlapping stretches of the two readings: one)
		}
		b.WriteString(sql[last:start])
		b.WriteString("''")
		last = end
	}
	b.WriteString(sql[last:])
	return b.String()
}

// Source says who produced the answer to a statement.
type Source uint8

const (
	FromBackend Source = iota // relayed from the backend
	FromPlugin                // answered by a plugin on the chain
	FromProxy                 // refused or answered by the proxy itself
)

func (s Source) String() string {
	switch s {
	case FromBackend:
		return "backend"
	case FromPlugin:
		return "plugin"
	}
	return "proxy"
}

// Outcome is how a statement ended.
type Outcome struct {
	Duration     time.Duration
	Source       Source
	Plugin       string         // the answering or refusing plugin, if any
	Err          *mysql.MyError // nil on success; the backend's error as sent, or the proxy's
	AffectedRows uint64         // from the final OK packet, when there was one
	Rows         uint64         // result-set rows relayed
	Warnings     uint16
	Status       uint16 // server status flags the client was last sent (SERVER_STATUS_IN_TRANS, ...)
}

// The status bits a result's final EOF may carry about how the backend ran
// the query; Capture.FinalStatus keeps them.
const IndexUsageStatus = mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED

// ConnEventKind tells what happened to a client connection.
type ConnEventKind uint8

const (
	ConnOpened   ConnEventKind = iota // authenticated and bound to a backend
	ConnClosed                        // ended, for whatever reason
	ConnRejected                      // refused before it was opened (auth, limit, backend down)
	// ConnReset: the session's state was reset (COM_RESET_CONNECTION, or
	// COM_CHANGE_USER onto a fresh backend connection): its transaction,
	// if any, ended without a commit, and Statement.Session is a new one.
	ConnReset
)

func (k ConnEventKind) String() string {
	switch k {
	case ConnOpened:
		return "opened"
	case ConnClosed:
		return "closed"
	case ConnReset:
		return "reset"
	}
	return "rejected"
}

// ConnEvent describes one connection event.
type ConnEvent struct {
	Kind   ConnEventKind
	ConnID uint32
	User   string
	Remote net.Addr
	Err    *mysql.MyError // for ConnRejected: what the client was told
}

// ResponseWriter is how a plugin that answers a statement writes its answer.
// Exactly one method must be called, once.
type ResponseWriter interface {
	// WriteResult writes an OK packet (r.Resultset == nil) or a text-protocol
	// result set (for COM_QUERY) or binary-protocol one (for COM_STMT_EXECUTE).
	WriteResult(r *mysql.Result) error
	// WriteError writes an ERR packet.
	WriteError(e *mysql.MyError) error
	// WritePacket writes one packet payload as it is; the proxy adds the
	// header and sequence number. A plugin that encodes its own result sets
	// (the cache, on its hot path) uses it, and must write a complete,
	// well-formed response. The payload is copied before WritePacket
	// returns: the plugin may reuse its buffer for the next packet.
	WritePacket(payload []byte) error
	// Status is the server status the session's last response carried,
	// for the EOF and OK packets a plugin writes.
	Status() uint16
	// SetStatus sets the server status the session is in from this answer
	// on: a plugin that answers BEGIN or COMMIT itself changes
	// SERVER_STATUS_IN_TRANS. The packets written after it carry it, and
	// later statements see it (Statement.InTx).
	SetStatus(status uint16)
	// Rows tells the proxy how many rows the answer had, for observers.
	Rows(n uint64)
	// ExtendedMetadata reports whether the client negotiated MariaDB's
	// extended column metadata: column definitions then carry one more
	// field (the extended type info) after the column's original name.
	ExtendedMetadata() bool
}

// ProgressWriter is implemented by the ResponseWriter of a session whose
// client asked for MariaDB's progress reports (MARIADB_CLIENT_PROGRESS, as
// the mariadb command-line client does): a plugin whose answer takes long
// (an ALTER run as a job) may send any number of reports before the one
// answer. Check ReportsProgress first: other clients would take a report
// for an error.
type ProgressWriter interface {
	ReportsProgress() bool
	// Progress sends one report, at once: stage of maxStage (counted from
	// 1), percent done within the stage, and what the stage is.
	Progress(stage, maxStage int, percent float64, info string) error
}

// Responder produces an answer for the client. The proxy reuses w for the
// session's next answer: Respond must not keep it.
type Responder interface {
	Respond(w ResponseWriter) error
}

// ResponderFunc adapts a function to Responder.
type ResponderFunc func(w ResponseWriter) error

// Respond calls f(w).
func (f ResponderFunc) Respond(w ResponseWriter) error { return f(w) }

// Verdict is a filter's decision.
type Verdict uint8

const (
	Pass   Verdict = iota // let the next plugin, then the backend, handle it
	Answer                // the Responder answers; the backend never sees it
	Refuse                // the client gets Err; the backend never sees it
)

// Action is returned by StatementFilter.OnStatement.
type Action struct {
	Verdict   Verdict
	Responder Responder
	Err       *mysql.MyError
	// Capture, with Verdict Pass, asks the proxy to record the column
	// definitions of the backend's response, or all of it (see Capture).
	Capture *Capture
	// PrepareAs, with Verdict Pass on a COM_STMT_PREPARE, is the text the
	// backend prepares instead of the client's, with as many parameters:
	// for a statement a filter answers when executed that the backend
	// cannot prepare (it names tables the backend has not). The client
	// gets the stand-in's prepare response; its executions show the chain
	// the client's own text.
	PrepareAs string
}

// Capture receives what the relay saw of a response, for a plugin that
// learns from the backend (the cache learns each statement shape's column
// metadata from the backend's own answer). It is filled before
// OnResult is called.
type Capture struct {
	// Columns are the column-definition packet payloads of the response's
	// result set, copied. Nil unless the response was exactly one result set.
	Columns [][]byte
	// Binary reports whether rows were in the binary protocol.
	Binary bool
	// MidStatus and FinalStatus are the status flags of the result's EOF
	// packets after the column definitions and after the rows.
	MidStatus, FinalStatus uint16

	// Full asks for every packet payload of the response, copied into Data
	// in order (packet i is Data[Ends[i-1]:Ends[i]]), as long as the
	// response stays within MaxBytes of payload. Past that the recording
	// stops and Truncated is set: Data and Ends are then nil, so a large
	// response costs the proxy no memory. The relay records nothing when
	// Full is not set.
	Full      bool
	MaxBytes  int
	Data      []byte
	Ends      []int
	Truncated bool
	// Results counts the results (result sets, OK and ERR packets) of a
	// fully captured response, and Warnings is the warning count of its
	// last EOF or OK packet.
	Results  int
	Warnings uint16
}

// Continue lets the statement go on.
var Continue = Action{}

// AnswerWith answers the statement in the proxy.
func AnswerWith(r Responder) Action { return Action{Verdict: Answer, Responder: r} }

// RefuseWith refuses the statement with a MySQL error.
func RefuseWith(e *mysql.MyError) Action { return Action{Verdict: Refuse, Err: e} }

// Chain runs the enabled plugins in their configured order. It is built once
// at start and read concurrently by every session; it is never modified.
type Chain struct {
	all       []Plugin
	filters   []StatementFilter
	observers []StatementObserver
	conns     []ConnObserver
}

// NewChain orders plugins as given: filters run in that order, and the first
// one that answers or refuses ends the walk.
func NewChain(ps ...Plugin) *Chain {
	c := &Chain{all: ps}
	for _, p := range ps {
		if f, ok := p.(StatementFilter); ok {
			c.filters = append(c.filters, f)
		}
		if o, ok := p.(StatementObserver); ok {
			c.observers = append(c.observers, o)
		}
		if o, ok := p.(ConnObserver); ok {
			c.conns = append(c.conns, o)
		}
	}
	return c
}

// Plugins returns the plugins in chain order.
func (c *Chain) Plugins() []Plugin { return c.all }

// HasObservers reports whether any plugin wants outcomes, so the proxy can
// skip timing statements when none does.
func (c *Chain) HasObservers() bool { return c != nil && len(c.observers) > 0 }

// Before walks the filters. It returns the deciding action and the name of
// the plugin that decided (empty when every filter passed).
func (c *Chain) Before(st *Statement) (Action, string) {
	if c == nil {
		return Continue, ""
	}
	// A filter that passes may still ask to see the response (Capture);
	// the first such request is kept.
	var capture *Capture
	var prepareAs string
	for _, f := range c.filters {
		a := f.OnStatement(st)
		if a.Verdict != Pass {
			return a, f.Name()
		}
		if capture == nil {
			capture = a.Capture
		}
		if prepareAs == "" {
			prepareAs = a.PrepareAs
		}
	}
	return Action{Capture: capture, PrepareAs: prepareAs}, ""
}

// After tells every observer the outcome.
func (c *Chain) After(st *Statement, out *Outcome) {
	if c == nil {
		return
	}
	for _, o := range c.observers {
		o.OnResult(st, out)
	}
}

// Conn tells every connection observer about ev.
func (c *Chain) Conn(ev ConnEvent) {
	if c == nil {
		return
	}
	for _, o := range c.conns {
		o.OnConn(ev)
	}
}

// Drain tells the plugins that the proxy is shutting down (see Drainer).
func (c *Chain) Drain() {
	if c == nil {
		return
	}
	for _, p := range c.all {
		if d, ok := p.(Drainer); ok {
			d.Drain()
		}
	}
}

// Shed calls Shed on every plugin that implements Shedder.
func (c *Chain) Shed() {
	if c == nil {
		return
	}
	for _, p := range c.all {
		if s, ok := p.(Shedder); ok {
			s.Shed()
		}
	}
}

// Close closes every plugin that holds resources, returning their errors joined.
func (c *Chain) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, p := range c.all {
		if cl, ok := p.(Closer); ok {
			if err := cl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("plugin %s: %w", p.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Factories maps the names a configuration may enable to what builds
// each plugin. The command assembles it at start: Builtins, then the
// plugins of other packages with what they are given (the cluster, the
// lease manager), so every dependency a plugin has is visible where it is
// built.
type Factories map[string]Factory

// Builtins returns the plugins of this package, ready to be extended.
func Builtins() Factories {
	return Factories{"metrics": newMetrics, "querylog": newQueryLog, "firewall": newFirewall}
}

// Add makes a plugin available by name. Two plugins cannot share a name:
// a second Add of one panics, as a wiring mistake.
func (f Factories) Add(name string, fn Factory) {
	if _, dup := f[name]; dup {
		panic("plugins: two plugins named " + name)
	}
	f[name] = fn
}

// Names lists the names of every plugin that can be enabled, sorted.
func (f Factories) Names() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
