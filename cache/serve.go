package cache

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/cache/eval"
	"tableproxy/cache/results"
	"tableproxy/internal/failpoint"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// Answering a SELECT from memory. The rows come from the snapshot, as the
// backend encoded them when the table was loaded; the column definitions
// and the status bits about index use come from the backend's own answer
// to the same statement shape, learned the first time the shape is seen
// (that execution goes to the backend and its response is recorded). So
// the metadata is the backend's, not an imitation of it.
//
// A session's settings decide how values are encoded: the proxy reads the
// ones that matter from the session's backend connection when they may have
// changed (at the first cached read, and after any statement that is not a
// plain read or write), and answers only when they are those the snapshot
// was loaded with.

// sessionKey is the cache's key in a session's plugin state.
type sessionKey struct{}

// sessionInfo is what the cache knows of a session's settings.
type sessionInfo struct {
	// limitUser's query limit is known (limitKnown): limited, its reads go
	// to the backend (limits.go).
	limitUser           string
	limitKnown, limited bool

	known    bool
	charset  string // @@character_set_results ("" for NULL)
	sqlMode  string
	pending  *pendingLearn // a response being recorded for this session
	settings string        // charset, sql_mode, account and role: part of the learned-metadata key
	// unlimited: sql_select_limit and max_join_size (sql_big_selects) are
	// at their defaults, so neither cuts nor refuses a SELECT.
	unlimited bool

	// Transactions. A transaction reads each cached table at one version:
	// the snapshot its first read of the table was answered from, or the
	// backend (nil) if that read went there or the transaction wrote the
	// table. pinSeq is the transaction (plugins.TxView.Seq) the pins are
	// of: the proxy says when one ends.
	pins   map[lease.TableID]*eval.Snapshot
	pinSeq uint64
	env    eval.RunEnv // character sets of string arguments, max_sort_length

	// pinnedAll: the transaction has read a cached table from memory, and
	// at that moment pinned every cached table, so that all of them are
	// read as of one moment; a table without a pin is read from the
	// backend.
	pinnedAll bool
	// fresh are the pins the statement being handled took (trying to
	// answer from memory); should the backend answer it after all (a
	// shape not learned yet, a value the evaluator does not take), it may
	// have taken the transaction's snapshot just then, after those
	// versions, so those tables are read from the backend (OnResult).
	fresh []lease.TableID
	// diagDirty: the last statement the backend answered left warnings or
	// an error in its diagnostics area, which a statement that reads
	// tables clears there; answered in memory, SHOW WARNINGS would still
	// show them. usesTables says the current statement reads or writes
	// tables, so that the backend's answer to it clears them.
	diagDirty, usesTables bool

	last   explanation  // the last statement's outcome, for EXPLAIN LAST STATEMENT
	temps  sessionTemps // the session's temporary tables (see temps.go)
	counts owedCounts   // FOUND_ROWS() and ROW_COUNT() the backend has not seen (see counts.go)
	// privilegesMayChange: the statement being handled may change the
	// backend's privileges (see privilegesID).
	privilegesMayChange bool
	// accountsMayChange: it may also change who may log in (see
	// accountsID).
	accountsMayChange bool
	// dropping are the cached tables the statement being handled drops
	// or renames away (see Plugin.afterDrop); altering, that it changes
	// the definition of one.
	dropping []lease.TableID
	altering bool
	// pureRead: the statement being handled is a read that changes
	// nothing (no locking clause, no INTO, deterministic functions only),
	// so a deferred BEGIN may travel with it (see plugins.Statement.Begin).
	pureRead bool
	// deferred: the session's transaction was begun by the proxy and has
	// not started in the backend yet (see begin.go).
	deferred bool

	rc    results.Session // the result cache's part
	plans planMemo        // the plan entries it used last
	// resultPending is an answer being recorded for the result cache.
	resultPending *pendingResult

	// Scratch space reused by every statement of the session.
	tmpl  []byte
	lits  []eval.Literal
	args  []eval.Arg
	serve servingScratch
}

// servingScratch is what an answer from memory reuses from one statement
// of its session to the next instead of allocating it per query. Between
// statements it refers to no snapshot: a session idle for hours must not
// keep an old version of a table in memory.
type servingScratch struct {
	run    eval.RowCtx // the plan's row selection (Plan.Run)
	write  eval.RowCtx // the rows being encoded (writeCached)
	rows   []int       // the rows selected (Plan.Run)
	buf    []byte      // one row's packet
	vals   [][]byte
	fields []*mysql.Field // the binary protocol's row values and their columns
	answer rowsAnswer
}

// maxKeptRowBuf and maxKeptRows bound the scratch a session keeps: a rare
// wide row or long result gets buffers of its own.
const (
	maxKeptRowBuf = 64 << 10
	maxKeptRows   = 8 << 10
)

// rowsAnswer answers a statement with rows of a snapshot, as selected by
// the plan (writeCached).
type rowsAnswer struct {
	meta        *learned
	pl          *eval.Plan
	snap        *eval.Snapshot
	rows        []int
	binaryProto bool
	env         eval.RunEnv
	scratch     *servingScratch
}

func (a *rowsAnswer) Respond(w plugins.ResponseWriter) error {
	return writeCached(w, a.meta, a.pl, a.snap, a.rows, a.binaryProto, a.env, a.scratch)
}

type pendingLearn struct {
	key     defsKey
	capture plugins.Capture
	plan    *eval.Plan
	snap    *eval.Snapshot
}

// defsKey identifies a statement shape under a session configuration.
// The plan entry it was planned as stands for the current database and
// the tables' definitions (a new definition gets a new entry): the same
// text may name another table in another database, and a column's
// metadata changes with its definition.
type defsKey struct {
	ent        *planEntry
	normalized string
	binary     bool
	ext        bool
	settings   string
	// privileges is the version of the backend's privileges when the
	// metadata was learned, which is when the backend checked that the
	// session may read what the shape reads (see privilegesID).
	privileges lease.Version
	// paramTypes are the types of a prepared statement's parameters and
	// its NULL bitmap, when its select list shows one: they decide the
	// column's definition.
	paramTypes string
}

// learned is the backend's metadata for a shape.
type learned struct {
	defs        [][]byte
	fields      []*mysql.Field // defs, parsed
	midStatus   uint16
	finalStatus uint16
}

// unread is the metadata of an answer for which the backend reads no
// table: without the index-use bits of the shape's first execution.
func (m *learned) unread() *learned {
	c := *m
	c.midStatus &^= plugins.IndexUsageStatus
	c.finalStatus &^= plugins.IndexUsageStatus
	return &c
}

// loaderCharset is the character set the loader's connection reads
// values in (the connector logs in with utf8mb4_general_ci).
const loaderCharset = "utf8mb4"

// session returns the cache's state for st's session.
func session(st *plugins.Statement) *sessionInfo {
	if si, ok := st.Session.Get(sessionKey{}).(*sessionInfo); ok {
		return si
	}
	si := &sessionInfo{}
	if st.Session != nil {
		st.Session.Set(sessionKey{}, si)
	}
	return si
}

// settingsChanged reports whether a statement of kind k may change session
// settings (SET, CALL, anything unusual), so they must be read again.
func settingsChanged(k plugins.Kind) bool {
	switch k {
	case plugins.KindSelect, plugins.KindInsert, plugins.KindUpdate, plugins.KindDelete, plugins.KindReplace,
		plugins.KindBegin, plugins.KindCommit, plugins.KindRollback, plugins.KindShow, plugins.KindUse:
		return false
	}
	return true
}

// probe reads the session settings that change how values are encoded.
func (si *sessionInfo) probe(st *plugins.Statement) bool {
	if si.known {
		return true
	}
	if st.Backend == nil {
		return false
	}
	// CURRENT_USER() and CURRENT_ROLE() are who the backend checks
	// privileges for: they are part of the learned-metadata key, so that
	// a shape one account or role may read is learned (and so checked)
	// for each of them.
	r, err := st.Backend.Query(settingsQuery)
	if err != nil {
		return false
	}
	defer r.Close()
	si.charset = eval.ResultString(r, 0, 0)
	si.sqlMode = eval.ResultString(r, 0, 1)
	client, conn := eval.ResultString(r, 0, 2), eval.ResultString(r, 0, 3)
	si.env.ASCIIArgs = asciiCompatible(client) && asciiCompatible(conn)
	si.env.DefaultParse = parsesAsDefault(si.sqlMode)
	si.env.NoUnsignedSubtraction = strings.Contains(si.sqlMode, "NO_UNSIGNED_SUBTRACTION")
	si.env.UTF8Args = client == "utf8mb4" && conn == "utf8mb4"
	msl, _ := r.GetInt(0, 4)
	si.env.MaxSortLength = int(msl)
	si.env.TZOffset, si.env.TZFixed = eval.FixedOffset(eval.ResultString(r, 0, 5), eval.ResultString(r, 0, 6))
	dpi, _ := r.GetInt(0, 7)
	si.env.DivPrecision = int(dpi)
	si.env.PlainValues = plainValues(si.sqlMode)
	// A session that limits or refuses SELECTs by their size
	// (sql_select_limit, max_join_size) reads from the backend, which
	// applies the limits.
	si.unlimited = eval.ResultString(r, 0, 9) == maxSelectLimit && eval.ResultString(r, 0, 10) == "1"
	// The settings that change the metadata of an answer (the collation
	// of string columns follows collation_connection when it is in the
	// results' character set), and whose privileges it was read with.
	si.settings = si.charset + "|" + si.sqlMode + "|" + strconv.Itoa(si.env.DivPrecision) + "|" +
		eval.ResultString(r, 0, 8) + "|" + eval.ResultString(r, 0, 11) + "|" + eval.ResultString(r, 0, 12)
	si.known = true
	return true
}

// settingsQuery reads the session settings probe takes in. (The
// transaction's, the isolation level and autocommit among them, are the
// proxy's: plugins.TxView.)
const settingsQuery = "SELECT @@character_set_results, @@sql_mode, @@character_set_client, @@character_set_connection" +
	", @@max_sort_length, @@time_zone, @@system_time_zone, @@div_precision_increment, @@collation_connection" +
	", @@sql_select_limit, @@sql_big_selects, CURRENT_USER(), CURRENT_ROLE()"

// maxSelectLimit is sql_select_limit's default: no limit.
const maxSelectLimit = "18446744073709551615"

// parsesAsDefault reports whether statements parse in sql_mode as in the
// default mode the proxy's parser uses: the modes that change what a
// double quote, ||, NOT or a backslash mean are not set.
func parsesAsDefault(sqlMode string) bool {
	for _, m := range strings.Split(sqlMode, ",") {
		switch m {
		case "ANSI", "ANSI_QUOTES", "PIPES_AS_CONCAT", "HIGH_NOT_PRECEDENCE", "NO_BACKSLASH_ESCAPES":
			return false
		}
	}
	return true
}

// PlainValues reports whether values come out of the backend as stored:
// EMPTY_STRING_IS_NULL (MariaDB) turns ” into NULL and
// PAD_CHAR_TO_FULL_LENGTH pads CHAR values, in results too.
func plainValues(sqlMode string) bool {
	for _, m := range strings.Split(sqlMode, ",") {
		switch m {
		case "EMPTY_STRING_IS_NULL", "PAD_CHAR_TO_FULL_LENGTH":
			return false
		}
	}
	return true
}

// blocked says why the session's reads may not be answered in memory now
// whatever they read, or "".
func (si *sessionInfo) blocked(st *plugins.Statement) eval.Why {
	switch {
	case st.Tx.TableLocks():
		return eval.Because(eval.TableLocks, "the session holds table locks (LOCK TABLES): the backend decides which tables it may read")
	case si.diagDirty:
		return eval.Because(eval.Diagnostics, "the backend's last answer left warnings or an error, which a read of tables clears there (SHOW WARNINGS would differ)")
	}
	return eval.Why{}
}

// asciiCompatible reports whether a character set encodes ASCII as ASCII
// (the multi-byte ones such as ucs2 and utf16 do not; neither do the Asian
// sets whose second bytes may look like ASCII).
func asciiCompatible(cs string) bool {
	switch cs {
	case "utf8mb4", "utf8mb3", "utf8", "latin1", "ascii", "binary":
		return true
	}
	return false
}

// planKey identifies a statement shape in the plan cache.
type planKey struct {
	db   string
	text string // the template (text protocol) or the prepared text
}

// planEntry is a cached planning outcome.
type planEntry struct {
	key    planKey
	plan   *eval.Plan // nil: the shape is not answered from memory
	writes bool       // calls a stored function (or may: why says): may write any table
	layout string
	tables []lease.TableID // cached tables the statement reads, for pass counts
	why    eval.Why        // when plan is nil: why
	// results: the statement may be answered from the result cache
	// (nil: it may not).
	results *results.Shape
}

// planMemo holds the plan entries a session used last, with the column
// metadata learned for them, so that a statement the session repeats skips
// the plugin's shared plan and metadata caches (a lock and an LRU update
// each). It holds for one generation of the plan cache (Plugin.planGen),
// which every removal from that cache ends.
type planMemo struct {
	gen   uint64
	slots [4]memoSlot
	next  int // the slot to reuse next
}

type memoSlot struct {
	ent     *planEntry
	metaKey defsKey
	meta    *learned // learned for metaKey; nil: not looked up, or not learned yet
}

// find returns the slot of the entry planned for text in database db, if
// the memo has it and is of generation gen.
func (m *planMemo) find(gen uint64, db, text string) *memoSlot {
	if m.gen != gen {
		*m = planMemo{gen: gen}
		return nil
	}
	for i := range m.slots {
		if s := &m.slots[i]; s.ent != nil && s.ent.key.text == text && s.ent.key.db == db {
			return s
		}
	}
	return nil
}

// add puts ent in the memo in place of its oldest entry.
func (m *planMemo) add(ent *planEntry) *memoSlot {
	s := &m.slots[m.next]
	m.next = (m.next + 1) % len(m.slots)
	*s = memoSlot{ent: ent}
	return s
}

// read tries to answer a SELECT from memory, and records why it did or
// did not for EXPLAIN LAST STATEMENT.
func (p *Plugin) read(st *plugins.Statement) plugins.Action {
	si := session(st)
	if opensCursor(st) {
		// The backend answers such an execute with a cursor (rows come
		// by COM_STMT_FETCH), which the proxy does not keep.
		p.explain(si, st.SQL, false, eval.Because(eval.OpensCursor, "the execute opens a cursor, which the backend keeps"))
		return plugins.Continue
	}
	a, why := p.readWhy(st, si)
	p.explain(si, st.SQL, a.Verdict == plugins.Answer, why)
	return a
}

// opensCursor reports whether st is a COM_STMT_EXECUTE whose flags ask
// for a cursor (CURSOR_TYPE_READ_ONLY and the others).
func opensCursor(st *plugins.Statement) bool {
	return st.Command == plugins.ComStmtExecute && len(st.Params) > 0 && st.Params[0] != 0
}

// readWhy is read's decision and the reason for it: the statement's plan,
// the snapshots it reads, the session's settings, the learned column
// metadata, then the run and the answer.
func (p *Plugin) readWhy(st *plugins.Statement, si *sessionInfo) (plugins.Action, eval.Why) {
	binaryProto := st.Command == plugins.ComStmtExecute
	text, args := st.SQL, []eval.Arg(nil)
	if len(st.SQL) <= p.maxPlannedText {
		// (A longer one is not planned: its template, an argument per
		// literal, would only be garbage.)
		text, args = si.statementText(st, binaryProto)
	}
	memo, text := p.planFor(st, si, text)
	if memo == nil {
		return plugins.Continue, eval.Because(eval.TableLoading, "a cached table it reads is still loading")
	}
	ent := memo.ent
	if ent.writes {
		why := ent.why
		if !why.Declined() {
			why = eval.Because(eval.StoredFunction, "it calls a stored function, which may write: a write of every cached table")
		}
		return p.unknownRead(st), why
	}
	si.pureRead = ent.plan != nil || ent.results != nil && !ent.results.Reparse
	if ent.plan == nil {
		return p.declinedWhy(st, si, ent, ent.why)
	}
	pl := ent.plan
	var tss [2]*tableState
	for i, id := range pl.Tables {
		if tss[i] = p.table(id); tss[i] == nil {
			return plugins.Continue, eval.Because(eval.TableNotCached, "the table is no longer cached")
		}
	}
	count := func(hit bool) {
		for _, ts := range tss[:len(pl.Tables)] {
			if hit {
				ts.hits.Add(1)
			} else {
				ts.passes.Add(1)
			}
		}
	}
	pass := func(why eval.Why) (plugins.Action, eval.Why) {
		return p.declinedWhy(st, si, ent, why)
	}
	si.usesTables = true
	snaps, why := p.snapshotsFor(st, si, pl)
	if why.Declined() {
		return pass(why)
	}
	failpoint.Panic("cache.read.snapshot", st.SQL)
	snap := snaps[0]
	if pl.Join != nil {
		snap = eval.JoinSnapshot(snaps[0], snaps[1], nil)
	}
	if snap.Layout != ent.layout {
		p.forgetPlan(ent.key) // the table changed shape
		return pass(eval.Because(eval.LayoutChanged, "the table's columns changed since the statement was planned"))
	}
	if args, why = si.argsFor(st, pl, args, binaryProto); why.Declined() {
		return pass(why)
	}
	if why := p.sessionServes(st, si, pl, snap, binaryProto); why.Declined() {
		return pass(why)
	}
	key, meta := p.learnedFor(st, si, memo, text, binaryProto)
	zeroLimit := pl.ZeroLimit(args)
	if meta == nil && zeroLimit {
		return pass(eval.Because(eval.LimitZero, "LIMIT 0: the backend reads no table, so its answer's status is not what the shape's other executions get"))
	}
	if meta == nil {
		// Learn this shape's metadata from the backend's answer.
		key.normalized = strings.Clone(key.normalized)
		pend := &pendingLearn{key: key, plan: pl, snap: snap}
		si.pending = pend
		count(false)
		return plugins.Action{Verdict: plugins.Pass, Capture: &pend.capture},
			eval.Because(eval.LearningMetadata, "first execution of this shape in these settings: the backend answers, and its column metadata is learned")
	}
	if zeroLimit {
		meta = meta.unread()
	}
	if pl.Join != nil {
		joined, why := pl.JoinRows(snaps[0], snaps[1], args, si.env)
		if why.Declined() {
			return pass(why)
		}
		snap = eval.JoinSnapshot(snaps[0], snaps[1], joined)
	}
	rows, why := pl.Run(si.serve.run.Reuse(snap, args, si.env), si.serve.rows)
	si.serve.run.Release()
	if cap(rows) <= maxKeptRows {
		si.serve.rows = rows[:0] // (in use until the statement is answered)
	}
	if why.Declined() {
		return pass(why)
	}
	resp, why := answer(pl, snap, rows, args, si.env, meta, binaryProto, &si.serve)
	if why.Declined() {
		return pass(why)
	}
	count(true)
	if failpoint.Armed("cache.read.answer") {
		resp = failAnswer(resp, st.SQL)
	}
	return plugins.AnswerWith(resp), eval.Why{}
}

// failAnswer is resp, which panics at the failpoint cache.read.answer
// once it has written the head of its answer.
func failAnswer(resp plugins.Responder, sql string) plugins.Responder {
	return plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		return resp.Respond(failingWriter{w, sql})
	})
}

// failingWriter reaches the failpoint cache.read.answer at its second
// packet (the first column's definition).
type failingWriter struct {
	plugins.ResponseWriter
	sql string
}

func (w failingWriter) WritePacket(b []byte) error {
	if err := w.ResponseWriter.WritePacket(b); err != nil {
		return err
	}
	failpoint.Panic("cache.read.answer", w.sql)
	return nil
}

// statementText is the text st is planned by, and its arguments: a
// text-protocol statement's template, its literals the arguments; or the
// statement as it is (a prepared text, or a statement whose literals a
// template does not take). The text and arguments may point into the
// session's buffers and the statement's.
func (si *sessionInfo) statementText(st *plugins.Statement, binaryProto bool) (string, []eval.Arg) {
	if binaryProto {
		return st.SQL, nil
	}
	tmpl, lits, ok := eval.TemplateOf(st.SQL, si.tmpl, si.lits)
	si.tmpl, si.lits = tmpl, lits
	if !ok {
		// Comments, escapes, other literals: the statement is planned
		// as it is, its literals in the plan (one plan per text).
		return st.SQL, nil
	}
	args := si.args[:0]
	for _, l := range lits {
		if l.IsInt {
			args = append(args, eval.Arg{V: l.N})
		} else {
			args = append(args, eval.Arg{Str: true, S: unsafe.Slice(unsafe.StringData(l.S), len(l.S))})
		}
	}
	si.args = args
	return unsafe.String(unsafe.SliceData(tmpl), len(tmpl)), args
}

// planFor finds text's plan entry in the session's memo, in the plan
// cache, or by planning it now, and returns the text as kept (a copy, if
// it was planned now); nil when a cached table it reads is still loading.
func (p *Plugin) planFor(st *plugins.Statement, si *sessionInfo, text string) (*memoSlot, string) {
	if memo := si.plans.find(p.planGen.Load(), st.DB, text); memo != nil {
		return memo, text
	}
	ent, ok := p.plans.Get(planKey{db: st.DB, text: text})
	if !ok && len(text) > p.maxPlannedText {
		// Not planned, nor kept: its plan would hold an operand per
		// literal (see memory.go).
		ent = &planEntry{why: eval.Because(eval.TextTooLong, fmt.Sprintf("the statement is longer than max_planned_text (%d bytes)", p.maxPlannedText))}
		return si.plans.add(ent), text
	}
	if !ok {
		text = strings.Clone(text) // the key outlives the statement
		if ent = p.planText(text, st.DB); ent == nil {
			return nil, text
		}
		ent.key = planKey{db: strings.Clone(st.DB), text: text}
		p.plans.Add(ent.key, ent, planCost(ent))
	}
	return si.plans.add(ent), text
}

// snapshotsFor finds the snapshots st reads pl's tables at, or says why
// the session, or a table's state, sends the read to the backend.
func (p *Plugin) snapshotsFor(st *plugins.Statement, si *sessionInfo, pl *eval.Plan) ([2]*eval.Snapshot, eval.Why) {
	var snaps [2]*eval.Snapshot
	if why := si.blocked(st); why.Declined() {
		return snaps, why
	}
	if why := p.queryLimited(st, si); why.Declined() {
		return snaps, why
	}
	for _, id := range pl.Tables {
		if p.shadowed(st, si, id) {
			return snaps, eval.Because(eval.TemporaryTable, "the session has (or may have) a temporary table of the table's name, which hides it")
		}
	}
	var ok bool
	for i, id := range pl.Tables {
		if st.InTx {
			if snaps[i], ok = p.txSnapshot(st, si, id); !ok {
				return snaps, eval.Because(eval.InTransactionBackend, "in this transaction the table is read from the backend (it wrote the table, read it there first, or its isolation is not REPEATABLE READ)")
			}
		} else if snaps[i], ok = p.Servable(id); !ok {
			return snaps, eval.Because(eval.StaleCopy, "the table's newest version is not in memory (a write is in progress, or it is reloading)")
		}
	}
	return snaps, eval.Why{}
}

// argsFor returns the statement's arguments for pl: a prepared
// statement's parameters, decoded; a template's literals, as they are;
// or why they do not fit the plan.
func (si *sessionInfo) argsFor(st *plugins.Statement, pl *eval.Plan, args []eval.Arg, binaryProto bool) ([]eval.Arg, eval.Why) {
	if binaryProto {
		if pl.NParams != st.ParamCount {
			return args, eval.Because(eval.ParamsMismatch, "the statement's parameters do not match its plan")
		}
		var ok bool
		if args, ok = eval.DecodeParams(st.Params, st.ParamCount, st.ParamTypes, si.args); !ok {
			return args, eval.Because(eval.ParamType, "a parameter's type is not covered (integers and strings are)")
		}
		si.args = args
	} else if len(args) != pl.NParams {
		return args, eval.Because(eval.ParamsMismatch, "the statement's literals do not match its plan")
	}
	if !pl.ArgsMatch(args) {
		return args, eval.Because(eval.ParamType, "a string is compared with an integer column, or a number with a string column (compared as numbers)")
	}
	return args, eval.Why{}
}

// sessionServes says why the session would not read pl's answer from snap
// as the evaluator writes it (its settings, character set, sql_mode,
// transaction mode or limits), if it would not.
func (p *Plugin) sessionServes(st *plugins.Statement, si *sessionInfo, pl *eval.Plan, snap *eval.Snapshot, binaryProto bool) eval.Why {
	switch {
	case !si.probe(st):
		return eval.Because(eval.SessionUnknown, "the session's settings could not be read")
	case !p.encodable(pl, snap, si, binaryProto):
		return eval.Because(eval.SessionEncoding, "a column's values would be sent otherwise in this session (character set, time zone, sql_mode or protocol)")
	case !si.env.ASCIIArgs:
		return eval.Because(eval.SessionCharset, "the session's character set is not ASCII-compatible")
	case !st.InTx && !st.Tx.Autocommit():
		return eval.Because(eval.AutocommitOff, "autocommit is off: the read starts a transaction in the backend")
	case !si.env.DefaultParse:
		return eval.Because(eval.SQLModeParse, "the session's sql_mode changes how statements parse (ANSI_QUOTES, PIPES_AS_CONCAT, HIGH_NOT_PRECEDENCE or NO_BACKSLASH_ESCAPES)")
	case !si.env.PlainValues:
		return eval.Because(eval.SQLModeValues, "the session's sql_mode changes values in results (EMPTY_STRING_IS_NULL or PAD_CHAR_TO_FULL_LENGTH)")
	case !si.unlimited:
		return eval.Because(eval.SelectLimit, "the session limits SELECTs (sql_select_limit, or max_join_size with sql_big_selects off), which the backend applies")
	}
	return eval.Why{}
}

// learnedFor is the key of the column metadata learned for the
// statement's shape in these settings, and that metadata (nil: not
// learned yet), looked up through the session's memo.
func (p *Plugin) learnedFor(st *plugins.Statement, si *sessionInfo, memo *memoSlot, text string, binaryProto bool) (defsKey, *learned) {
	ent, pl := memo.ent, memo.ent.plan
	key := defsKey{ent: ent, normalized: text, binary: binaryProto, ext: st.ExtendedMetadata, settings: si.settings}
	key.privileges = p.privilegesVersion()
	if binaryProto && pl.ParamsShown {
		// The types in force and which values are NULL (the backend types
		// a NULL as NULL, whatever type was bound).
		key.paramTypes = string(st.ParamTypes) // (a shape that shows a parameter is rare)
		if n := 5 + (st.ParamCount+7)/8; n <= len(st.Params) {
			key.paramTypes += "\x00" + string(st.Params[5:n])
		}
	}
	if pl.NamesFromText && !binaryProto {
		// Column names as typed, literals and spaces included: the select
		// list's own text is part of the shape (the rest of the statement,
		// WHERE literals and all, is not).
		if list, ok := selectListText(st.SQL); ok {
			key.normalized = text + "\x00" + list
		} else {
			key.normalized = st.SQL
		}
	}
	meta := memo.meta
	if meta == nil || memo.metaKey != key {
		meta, _ = p.learned.Get(key)
		memo.meta, memo.metaKey = meta, key
		// The memo outlives the statement, whose text is in buffers the
		// next command reuses.
		if key.normalized == ent.key.text {
			memo.metaKey.normalized = ent.key.text
		} else {
			memo.metaKey.normalized = strings.Clone(key.normalized)
		}
	}
	return key, meta
}

// answer is the plan's answer from the rows run selected, written with
// meta's column definitions, or why it cannot be computed exactly. Plain
// rows are answered with sc's rowsAnswer.
func answer(pl *eval.Plan, snap *eval.Snapshot, rows []int, args []eval.Arg, env eval.RunEnv, meta *learned, binaryProto bool, sc *servingScratch) (plugins.Responder, eval.Why) {
	if pl.PlainRows() {
		sc.answer = rowsAnswer{meta: meta, pl: pl, snap: snap, rows: rows, binaryProto: binaryProto, env: env, scratch: sc}
		return &sc.answer, eval.Why{}
	}
	out, why := pl.ValueRows(snap, rows, args, env)
	if why.Declined() {
		return nil, why
	}
	return plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		return writeValueRows(w, meta, out, binaryProto)
	}), eval.Why{}
}

// txSnapshot is the snapshot a transaction reads table id at: pinned by
// its first read, so every read of the table in the transaction sees one
// version. A transaction whose isolation is SERIALIZABLE (reads take
// locks), or unknown, reads from the backend.
func (p *Plugin) txSnapshot(st *plugins.Statement, si *sessionInfo, id lease.TableID) (*eval.Snapshot, bool) {
	if tx := st.Tx; tx.NextTxPending() || tx.Opaque() || !strings.EqualFold(tx.Isolation(), "REPEATABLE-READ") {
		return nil, false
	}
	if s, pinned := si.pins[id]; pinned {
		return s, s != nil
	}
	if si.pins == nil {
		si.pins = map[lease.TableID]*eval.Snapshot{}
	}
	if !si.pinnedAll {
		// The transaction's first read from memory pins every cached table
		// at once: whatever it reads later is as of this moment too.
		si.pinnedAll = true
		for _, other := range p.cachedIDs() {
			if _, pinned := si.pins[other]; !pinned {
				s, ok := p.Servable(other)
				if !ok {
					s = nil
				}
				si.pins[other] = s
				si.fresh = append(si.fresh, other)
			}
		}
	}
	s := si.pins[id] // nil, when it was not cached or servable then
	si.pins[id] = s
	return s, s != nil
}

// followTx drops the pins of a transaction that has ended (or begun
// afresh): those of the session's transaction now are kept.
func (si *sessionInfo) followTx(tx plugins.TxView) {
	if seq := tx.Seq(); seq != si.pinSeq {
		si.pins, si.pinnedAll, si.pinSeq = nil, false, seq
	}
}

// selectListText returns the text of a SELECT's select list as typed:
// from after SELECT to the FROM at the top level (or the end). It gives up
// (false) on anything it does not read plainly.
func selectListText(sql string) (string, bool) {
	i := 0
	for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
		i++
	}
	if len(sql)-i < 7 || !strings.EqualFold(sql[i:i+6], "SELECT") || !isSpace(sql[i+6]) {
		return "", false
	}
	start := i + 6
	depth := 0
	for i = start; i < len(sql); i++ {
		switch c := sql[i]; c {
		case '\'', '"', '`':
			j := i + 1
			for j < len(sql) && sql[j] != c {
				if sql[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(sql) {
				return "", false
			}
			i = j
		case '(':
			depth++
		case ')':
			depth--
		case 'f', 'F':
			if depth == 0 && isSpace(sql[i-1]) && i+4 < len(sql) && strings.EqualFold(sql[i:i+4], "FROM") &&
				(isSpace(sql[i+4]) || sql[i+4] == '`' || sql[i+4] == '(') {
				return sql[start:i], true
			}
		case '#':
			return "", false // a comment
		case '/', '-':
			if i+1 < len(sql) && (c == '/' && sql[i+1] == '*' || c == '-' && sql[i+1] == '-') {
				return "", false // /* or --: a comment
			}
		}
	}
	return sql[start:], true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// afterBackend follows what the backend keeps for the session beside its
// transaction: the diagnostics area.
func (si *sessionInfo) afterBackend(st *plugins.Statement, out *plugins.Outcome) {
	uses := si.usesTables
	si.usesTables = false
	if out.Source != plugins.FromBackend {
		return
	}
	switch {
	case out.Warnings > 0 || out.Err != nil:
		si.diagDirty = true
	case uses || st.Kind.IsWrite():
		si.diagDirty = false
	}
}

// pinUnreadToBackend follows a statement the backend answered inside a
// transaction (or that started one there, with autocommit off). InnoDB
// takes a REPEATABLE READ transaction's snapshot, for every table, at its
// first read of any table (or at START TRANSACTION WITH CONSISTENT
// SNAPSHOT), as of a moment the proxy cannot name. So every cached table
// the transaction has not read from memory yet is read from the backend
// until it ends: each table from one place, at one version, and all of
// them as of one snapshot.
func (p *Plugin) pinUnreadToBackend(si *sessionInfo) {
	if si.pinnedAll {
		return // every cached table has its pin already
	}
	if si.pins == nil {
		si.pins = map[lease.TableID]*eval.Snapshot{}
	}
	for _, id := range p.cachedIDs() {
		if _, pinned := si.pins[id]; !pinned {
			si.pins[id] = nil
		}
	}
	si.pinnedAll = true // (a table cached later is read from the backend too)
}

// mayTakeSnapshot reports whether st, run by the backend inside a
// transaction, may have taken the transaction's snapshot there: any
// statement run (not a PREPARE) but a plain BEGIN, COMMIT, ROLLBACK or USE
// (a SET or a CALL may read tables too).
func mayTakeSnapshot(st *plugins.Statement) bool {
	if st.Command != plugins.ComQuery && st.Command != plugins.ComStmtExecute {
		return false
	}
	switch st.Kind {
	case plugins.KindBegin:
		return plugins.ContainsFold(st.SQL, "CONSISTENT")
	case plugins.KindCommit, plugins.KindRollback, plugins.KindUse:
		return false
	}
	return true
}

// pinToBackend makes the session's transaction read ids from the backend.
func (si *sessionInfo) pinToBackend(ids []lease.TableID) {
	if si.pins == nil {
		si.pins = map[lease.TableID]*eval.Snapshot{}
	}
	for _, id := range ids {
		si.pins[id] = nil
	}
}

// planText plans a statement text (a template or a prepared text, with
// '?' markers), or returns nil when it cannot be decided yet Because a
// cached table it reads has no snapshot loaded.
func (p *Plugin) planText(text, db string) *planEntry {
	return planWith(text, db, func(id lease.TableID) (*eval.Snapshot, bool) {
		if ts := p.table(id); ts != nil {
			return ts.snap.Load(), true
		}
		return nil, false
	})
}

// planWith is planText over the tables lookup says are cached (with their
// loaded copies, nil while loading): the serving path asks it of the
// cached tables, the advisor (Plugin.PlanWhy) of a table's definition.
func planWith(text, db string, lookup func(lease.TableID) (*eval.Snapshot, bool)) *planEntry {
	if plugins.HidesCode(text) {
		return &planEntry{writes: true, why: eval.Because(eval.MariaDBComment, "it has a MariaDB executable comment (/*M! ... */), whose text the proxy does not read and which may call anything: a write of every cached table")}
	}
	pd := plugins.Parse(text)
	defer pd.Release() // the tree is the parser's until then
	stmts, err := pd.Stmts, pd.Err
	if err != nil {
		// Perhaps a literal where the grammar takes no marker: the result
		// cache decides on the full text.
		return &planEntry{why: eval.Because(eval.ParseFailed, "the statement is not one statement the parser reads"), results: &results.Shape{Reparse: true}}
	}
	if len(stmts) != 1 {
		return &planEntry{why: eval.Because(eval.ParseFailed, "the statement is not one statement the parser reads")}
	}
	if plugins.CallsUserFunction(stmts[0]) {
		return &planEntry{writes: true}
	}
	if plugins.ContainsFold(text, "/*!") {
		// The parser reads every executable comment's text; the backend
		// reads it or skips it by the version it names (MariaDB skips
		// /*!50700 to /*!99999 as MySQL's), so the two may not answer
		// the same statement.
		return &planEntry{why: eval.Because(eval.ExecutableComment, "it has an executable comment (/*! ... */), which the backend reads or skips by its version")}
	}
	shape := results.ShapeOf(stmts[0], db)
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok {
		return &planEntry{why: eval.Because(eval.NotPlainSelect, "only SELECT is answered in memory (UNION, TABLE and VALUES are not)"), results: shape}
	}
	ent := &planEntry{results: shape}
	loading := false
	for _, id := range collectTables(sel, db) {
		if snap, cached := lookup(id); cached {
			ent.tables = append(ent.tables, id)
			loading = loading || snap == nil
		}
	}
	if loading {
		return nil
	}
	pl, snap, why := eval.BuildPlan(sel, db, func(id lease.TableID) *eval.Snapshot {
		snap, _ := lookup(id)
		return snap
	})
	if pl != nil {
		ent.plan, ent.layout = pl, snap.Layout
	}
	ent.why = why
	if len(ent.tables) == 0 {
		ent.why = eval.Because(eval.NoCachedTable, "it reads no cached table")
	}
	return ent
}

// unknownRead handles a SELECT that calls a stored function, which may
// write any table: it is a write of every cached table.
func (p *Plugin) unknownRead(st *plugins.Statement) plugins.Action {
	session(st).rc.Known = false // a stored function may change settings too
	session(st).temps.opaque()   // or create temporary tables
	if ids := p.cachedIDs(); len(ids) > 0 {
		p.beginWrite(st, ids)
	}
	return plugins.Continue
}

// countPassesOf counts a read of cached tables that goes to the backend.
func (p *Plugin) countPassesOf(ids []lease.TableID) {
	for _, id := range ids {
		if ts := p.table(id); ts != nil {
			ts.passes.Add(1)
		}
	}
}

// encodable reports whether every projected column's value can be sent
// exactly as stored for this session.
func (p *Plugin) encodable(pl *eval.Plan, snap *eval.Snapshot, si *sessionInfo, binaryProto bool) bool {
	for _, c := range pl.Cols {
		f := snap.Fields[c]
		if f.Charset != 63 { // binary values are never converted
			switch si.charset {
			case loaderCharset:
			case "utf8mb3", "utf8":
				if !snap.BMP[c] {
					return false
				}
			case "latin1", "ascii":
				if !snap.ASCII[c] {
					return false
				}
			default:
				return false
			}
		}
		switch f.Type {
		case mysql.MYSQL_TYPE_TIMESTAMP:
			// Read in UTC; shifted to the session's zone if it is a fixed
			// offset.
			if !si.env.TZFixed {
				return false
			}
		case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
			// The text form does not always hold every bit: the binary
			// protocol sends the exact values read at load, in plain
			// column projections only.
			if binaryProto && (snap.Floats == nil || snap.Floats[c] == nil || pl.Computed) {
				return false
			}
		case mysql.MYSQL_TYPE_STRING:
			if strings.Contains(si.sqlMode, "PAD_CHAR_TO_FULL_LENGTH") {
				return false
			}
		}
	}
	return true
}

// learn records the backend's metadata for a shape, after checking that
// the response has the columns the plan projects, of the same types.
func (p *Plugin) learn(si *sessionInfo) {
	pend := si.pending
	si.pending = nil
	c := pend.capture
	pl := pend.plan
	if c.Columns == nil || len(c.Columns) != len(pl.Items) {
		return
	}
	fields := make([]*mysql.Field, len(c.Columns))
	for i, def := range c.Columns {
		f, err := mysql.FieldData(stripExtended(def, pend.key.ext)).Parse()
		if err != nil {
			return
		}
		fields[i] = f
		it := pl.Items[i]
		if it.Expr != nil {
			// Integer arithmetic is a BIGINT, UNSIGNED as its operands say.
			if f.Type != mysql.MYSQL_TYPE_LONGLONG || (f.Flag&mysql.UNSIGNED_FLAG != 0) != it.Expr.ResultUnsigned(si.env.NoUnsignedSubtraction) {
				return
			}
			continue
		}
		if it.Agg < 0 {
			if f.Type != pend.snap.Fields[it.Col].Type {
				return
			}
			continue
		}
		// The proxy computes aggregates itself, so it must know the type
		// the backend gives each: COUNT a BIGINT, SUM of integers a
		// DECIMAL without fraction, AVG one with div_precision_increment
		// digits of fraction, MIN and MAX the column's own type.
		switch g := pl.Aggs[it.Agg]; g.Fn {
		case "avg":
			if f.Type != mysql.MYSQL_TYPE_NEWDECIMAL || int(f.Decimal) != si.env.DivPrecision {
				return
			}
		case "count":
			if f.Type != mysql.MYSQL_TYPE_LONGLONG {
				return
			}
		case "sum":
			if f.Type != mysql.MYSQL_TYPE_NEWDECIMAL || f.Decimal != 0 {
				return
			}
		default:
			if f.Type != pend.snap.Fields[g.Col].Type {
				return
			}
		}
	}
	m := &learned{defs: c.Columns, fields: fields, midStatus: c.MidStatus, finalStatus: c.FinalStatus}
	p.learned.Add(pend.key, m, learnedCost(pend.key, m))
}

// stripExtended removes MariaDB's extended-metadata field from a column
// definition, so go-mysql can parse it.
func stripExtended(def []byte, ext bool) []byte {
	if !ext {
		return def
	}
	pos, ok := mysqlwire.ColumnNamesEnd(def)
	if !ok {
		return def
	}
	n, w, ok := mysqlwire.ReadLenEncInt(def[pos:])
	if !ok || pos+w+int(n) > len(def) {
		return def
	}
	out := append([]byte(nil), def[:pos]...)
	return append(out, def[pos+w+int(n):]...)
}

// writeCached writes a result set from the snapshot, with the session's
// scratch space.
func writeCached(w plugins.ResponseWriter, meta *learned, pl *eval.Plan, snap *eval.Snapshot, rows []int, binaryProto bool, env eval.RunEnv, sc *servingScratch) error {
	r := sc.write.Reuse(snap, nil, eval.RunEnv{})
	buf := sc.buf[:0]
	var vals [][]byte
	var fields []*mysql.Field
	if binaryProto {
		vals = slices.Grow(sc.vals[:0], len(pl.Cols))[:len(pl.Cols)]
		fields = slices.Grow(sc.fields[:0], len(pl.Cols))[:len(pl.Cols)]
		for j, c := range pl.Cols {
			fields[j] = snap.Fields[c]
		}
	}
	defer func() {
		// Keep the storage, not what it points to (see servingScratch).
		r.Release()
		clear(vals)
		clear(fields)
		sc.vals, sc.fields = vals[:0], fields[:0]
		if cap(buf) <= maxKeptRowBuf {
			sc.buf = buf[:0]
		}
	}()
	if err := writeHead(w, meta, buf); err != nil {
		return err
	}
	// TIMESTAMP columns to shift to the session's zone (the binary
	// protocol encodes them from text shifted by 0 too).
	var shift []bool
	var tsBuf []byte
	for j, c := range pl.Cols {
		if snap.Fields[c].Type == mysql.MYSQL_TYPE_TIMESTAMP && (env.TZOffset != 0 || binaryProto) {
			if shift == nil {
				shift = make([]bool, len(pl.Cols))
			}
			shift[j] = true
		}
	}
	// FLOAT and DOUBLE columns are sent from their exact values.
	var exact []bool
	if binaryProto && snap.Floats != nil {
		exact = make([]bool, len(pl.Cols))
		for j, c := range pl.Cols {
			exact[j] = snap.Floats[c] != nil
		}
	}
	for _, i := range rows {
		if !r.SetRow(snap.Rows[i]) {
			return errCorruptRow
		}
		buf = buf[:0]
		tsBuf = tsBuf[:0]
		if binaryProto {
			for j, c := range pl.Cols {
				v, null, _ := r.Field(c)
				if null {
					v = nil
				} else if exact != nil && exact[j] {
					start := len(tsBuf)
					tsBuf = appendFloat(tsBuf, snap.Fields[c].Type, snap.Floats[c][i])
					v = tsBuf[start:]
				} else if v == nil {
					v = []byte{} // an empty value, not NULL
				} else if shift != nil && shift[j] {
					start := len(tsBuf)
					var ok bool
					if tsBuf, ok = eval.ShiftTimestamp(tsBuf, v, env.TZOffset); !ok {
						return errCorruptRow
					}
					v = tsBuf[start:]
				}
				vals[j] = v
			}
			var ok bool
			if buf, ok = appendBinaryRow(buf, vals, fields, exact); !ok {
				return errCorruptRow
			}
		} else {
			for j, c := range pl.Cols {
				v, null, raw := r.Field(c)
				if shift != nil && shift[j] && !null {
					tsBuf = tsBuf[:0]
					var ok bool
					if tsBuf, ok = eval.ShiftTimestamp(tsBuf, v, env.TZOffset); !ok {
						return errCorruptRow
					}
					buf = mysqlwire.AppendLenEncBytes(buf, tsBuf)
					continue
				}
				buf = append(buf, raw...)
			}
		}
		if err := w.WritePacket(buf); err != nil {
			return err
		}
	}
	w.Rows(uint64(len(rows)))
	return writeTail(w, meta, buf)
}

// writeHead writes a result set's column count, the learned column
// definitions and the EOF after them, with the session's status and the
// backend's index-use bits for this shape.
func writeHead(w plugins.ResponseWriter, meta *learned, scratch []byte) error {
	if err := w.WritePacket(mysqlwire.AppendLenEncInt(scratch[:0], uint64(len(meta.defs)))); err != nil {
		return err
	}
	for _, d := range meta.defs {
		if err := w.WritePacket(d); err != nil {
			return err
		}
	}
	return results.WriteEOF(w, meta.midStatus, scratch)
}

// writeTail writes the EOF that ends the rows.
func writeTail(w plugins.ResponseWriter, meta *learned, scratch []byte) error {
	return results.WriteEOF(w, meta.finalStatus, scratch)
}

var errCorruptRow = corruptRowError{}

type corruptRowError struct{}

func (corruptRowError) Error() string { return "cache: a stored row could not be decoded" }

// writeValueRows writes a result set of computed rows (aggregates,
// groups): values as the text protocol prints them, nil for NULL.
func writeValueRows(w plugins.ResponseWriter, meta *learned, rows [][][]byte, binaryProto bool) error {
	if err := writeHead(w, meta, nil); err != nil {
		return err
	}
	var buf []byte
	for _, vals := range rows {
		buf = buf[:0]
		if binaryProto {
			var ok bool
			if buf, ok = appendBinaryRow(buf, vals, meta.fields, nil); !ok {
				return errCorruptRow
			}
		} else {
			for _, v := range vals {
				if v == nil {
					buf = append(buf, 0xfb)
					continue
				}
				buf = mysqlwire.AppendLenEncBytes(buf, v)
			}
		}
		if err := w.WritePacket(buf); err != nil {
			return err
		}
	}
	w.Rows(uint64(len(rows)))
	return writeTail(w, meta, buf)
}

// appendBinaryRow appends a binary-protocol row: the 0x00 header, the NULL
// bitmap (offset by two bits), then each non-NULL value (nil is NULL) in the
// encoding of its field's type, or as it is where encoded[j] is set.
func appendBinaryRow(buf []byte, vals [][]byte, fields []*mysql.Field, encoded []bool) ([]byte, bool) {
	buf = append(buf, 0)
	start := len(buf)
	buf = append(buf, make([]byte, (len(vals)+7+2)/8)...)
	for j, v := range vals {
		if v == nil {
			bit := j + 2
			buf[start+bit/8] |= 1 << (bit % 8)
			continue
		}
		if encoded != nil && encoded[j] {
			buf = append(buf, v...)
			continue
		}
		var ok bool
		if buf, ok = eval.AppendBinaryValue(buf, fields[j], v); !ok {
			return buf, false
		}
	}
	return buf, true
}

// appendFloat appends a FLOAT or DOUBLE in the binary protocol's encoding,
// from its exact value.
func appendFloat(b []byte, t byte, bits uint64) []byte {
	if t == mysql.MYSQL_TYPE_FLOAT {
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(math.Float64frombits(bits))))
	}
	return binary.LittleEndian.AppendUint64(b, bits)
}
