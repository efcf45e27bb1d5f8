package plugins

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/internal/sqllex"
)

// The account of a request: what every statement it runs does, read as the
// backend reads it. The request's text is first resolved for the backend's
// version (executable comments), then cut where the backend cuts it
// (sqllex.Split), and each statement is read on its own: MariaDB syntax
// that TiDB's parser lacks is peeled off first (SET STATEMENT ... FOR,
// RETURNING, SELECT ... INTO variables), compound statements are read
// statement by statement (sqllex.Body), EXECUTE IMMEDIATE and PREPARE read
// their text when it is a literal, and EXECUTE takes the account of what
// the session prepared. Whatever cannot be read this way is EffectUnknown,
// with its reason (Conservative).

// Conservative is why an account says EffectUnknown: the request may
// change any table.
type Conservative uint8

const (
	NotConservative    Conservative = iota
	WhyUnparsed                     // a statement the parser cannot read
	WhyUserFunction                 // a call of a stored function, which may write anything
	WhyCall                         // CALL of a stored procedure
	WhyDynamicSQL                   // EXECUTE IMMEDIATE or PREPARE of a text known only when it runs
	WhyUnknownPrepared              // EXECUTE of a statement prepared out of the proxy's sight
	WhyBlock                        // a compound statement that does not read as MariaDB's grammar
	WhyOther                        // a statement of a kind with effects the proxy does not follow (HANDLER, XA, ...)
	WhyTooComplex                   // more nested statements than the account reads (maxAccountWork)
	numConservative
)

// NumConservative is the number of reasons, for tables indexed by them.
const NumConservative = int(numConservative)

var conservativeNames = [numConservative]string{"", "unparsed", "user_function", "call", "dynamic_sql",
	"unknown_prepared", "block", "other", "too_complex"}

func (c Conservative) String() string {
	if c < numConservative {
		return conservativeNames[c]
	}
	return "other"
}

// ConservativeReasons lists every reason, for metrics that resolve their
// labels at start.
func ConservativeReasons() []Conservative {
	out := make([]Conservative, 0, numConservative-1)
	for c := WhyUnparsed; c < numConservative; c++ {
		out = append(out, c)
	}
	return out
}

// StmtInfo is one statement a request runs, as the backend reads it: its
// text (executable comments resolved) and kind. Dynamic: its text is known
// only when it runs (EXECUTE IMMEDIATE of an expression, EXECUTE of a
// statement prepared from one), so rules on text or kind must assume the
// worst of it. DB is the database its unqualified names resolve against,
// as far as the account knows. Prepared: listed by a PREPARE, it runs only
// at an EXECUTE.
type StmtInfo struct {
	SQL      string
	Kind     Kind
	Dynamic  bool
	Prepared bool
	DB       string
}

// maxAccountDepth bounds EXECUTE IMMEDIATE 'EXECUTE IMMEDIATE ”...”' and
// blocks within blocks; maxAccountWork, the texts one account reads in
// all (every reading of every nested text counts).
const (
	maxAccountDepth = 16
	maxAccountWork  = 4096
)

// accounting is the work of one account.
type accounting struct {
	dialect  sqllex.Dialect
	prepared *preparedTexts // the session's SQL-level prepared statements; nil outside a session
	out      Analysis
	db       string
	first    bool // no statement yet
	stmts    int  // statements seen
	// top and admin count the statements of the current reading and its
	// CACHE/NOCACHE statements; mixed: a reading had both.
	top, admin int
	mixed      bool
	// pending are the request's own PREPAREs and DEALLOCATEs (nil: gone),
	// seen by its later EXECUTEs; the session's record changes only once
	// the backend has run them (Statement.Finish).
	pending map[string]*Analysis
	work    int // texts read so far (see maxAccountWork)
}

// analyzeRequest is the account of sql, for unqualified names in db.
func analyzeRequest(sql, db string, d sqllex.Dialect, prepared *preparedTexts) (Analysis, error) {
	escapes := []bool{true}
	if sqllex.HasBackslashInQuote(sql) {
		// The session's NO_BACKSLASH_ESCAPES decides where a string ends,
		// and a request may change it: read it both ways.
		escapes = append(escapes, false)
	}
	ac := &accounting{dialect: d, prepared: prepared, db: db, first: true}
	ac.out.IndexOnly = true
	for _, esc := range escapes {
		for _, text := range sqllex.Readings(sql, d, esc) {
			ac.db, ac.top, ac.admin = db, 0, 0
			ac.text(text, esc, 0)
			ac.mixed = ac.mixed || ac.admin > 0 && ac.top > 1
		}
	}
	if ac.stmts == 0 {
		ac.out.IndexOnly = false
	}
	if ac.mixed {
		return Analysis{Named: ac.out.Named}, errMixedAdmin
	}
	return ac.out, nil
}

// text adds the statements of a text to the account.
func (ac *accounting) text(text string, esc bool, depth int) {
	if depth > maxAccountDepth {
		ac.unknown(WhyTooComplex)
		return
	}
	if ac.work++; ac.work > maxAccountWork {
		ac.unknown(WhyTooComplex)
		return
	}
	toks := sqllex.Tokens(text, esc)
	for _, s := range sqllex.Split(text, toks) {
		if depth == 0 {
			ac.top++
		}
		ac.statement(text, toks[s.From:s.To], s, esc, depth)
	}
}

// statement adds one statement (toks are its tokens in text).
func (ac *accounting) statement(text string, toks []sqllex.Token, s sqllex.Stmt, esc bool, depth int) {
	sql := text[s.Start:s.End]
	ac.stmts++
	ac.out.Stmts = append(ac.out.Stmts, StmtInfo{SQL: strings.Clone(sql), Kind: Classify(sql), DB: ac.db})
	word := func(i int) string {
		if i < len(toks) && toks[i].Kind == sqllex.Word {
			return toks[i].Text(text)
		}
		return ""
	}
	w0, w1 := word(0), word(1)
	switch {
	case s.Block:
		ac.block(text, toks, s, esc, depth)
		return
	case eqFold(w0, "SET") && eqFold(w1, "STATEMENT"):
		ac.setStatement(text, toks, esc, depth)
		return
	case eqFold(w0, "EXECUTE") && eqFold(w1, "IMMEDIATE"):
		ac.executeImmediate(text, toks[2:], esc, depth)
		return
	case eqFold(w0, "PREPARE"):
		ac.prepare(text, toks, esc, depth)
		return
	case eqFold(w0, "EXECUTE"):
		ac.execute(text, toks)
		return
	case eqFold(w0, "DEALLOCATE") || eqFold(w0, "DROP") && eqFold(w1, "PREPARE"):
		if len(toks) >= 3 {
			ac.setPrepared(toks[2].Text(text), nil)
		}
		ac.none()
		return
	case eqFold(w0, "HANDLER") || eqFold(w0, "XA") || eqFold(w0, "CHECK") || eqFold(w0, "REPAIR") ||
		eqFold(w0, "SIGNAL") || eqFold(w0, "RESIGNAL") || eqFold(w0, "GET"):
		ac.lexical(sql, w0)
		return
	}
	if ac.accountWords(toks, text) {
		// GRANT, CREATE USER, SET ROLE, ...: they change no table's rows
		// (the grant tables' own changes are followed by Accounts).
		ac.none()
		return
	}
	if cut := returningAt(text, toks); cut >= 0 {
		// INSERT / REPLACE / DELETE ... RETURNING list: the statement
		// before it writes its table; the list only reads (unless it
		// calls a stored function).
		ac.parsed(text[s.Start:toks[cut].Start], sql)
		ac.expression(text[toks[cut].End:s.End])
		return
	}
	if into := selectIntoAt(text, toks); into >= 0 {
		// SELECT ... INTO var[, var]: the parser reads only INTO OUTFILE
		// and DUMPFILE; without the variables it is the same read.
		end := intoEnd(text, toks, into)
		stripped := text[s.Start:toks[into].Start] + " " + text[endOffset(toks, end, s.End):s.End]
		ac.parsed(stripped, sql)
		return
	}
	ac.parsed(sql, sql)
}

// parsed adds a statement that TiDB's parser should read (sql), for the
// statement as written (orig).
func (ac *accounting) parsed(sql, orig string) {
	pd := Parse(sql)
	defer pd.Release() // (the tree is the parser's until then; what the account keeps is copied)
	stmts, err := pd.Stmts, pd.Err
	if err != nil || len(stmts) != 1 {
		ac.unparsed(orig)
		return
	}
	stmt := stmts[0]
	if u, ok := stmt.(*ast.UseStmt); ok {
		ac.db = strings.Clone(u.DBName) // later statements resolve against it
	}
	a := analyzeOne(stmt, ac.db)
	a.Named = namedIn(stmts, ac.db)
	a.IndexOnly = AddsIndexesOnly(stmt)
	if a.Effect == EffectUnknown && a.Why == NotConservative {
		a.Why = WhyOther
		if _, ok := stmt.(*ast.CallStmt); ok {
			a.Why = WhyCall
		} else if CallsUserFunction(stmt) {
			a.Why = WhyUserFunction
		}
	}
	if seqs := SequencesAdvanced(stmt, ac.db); len(seqs) > 0 && a.Effect < EffectWrite {
		// SELECT NEXTVAL(s): a read that writes the sequence's table.
		a.Effect, a.Tables = EffectWrite, appendUnique(a.Tables, seqs...)
	}
	switch stmt.(type) {
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.LoadDataStmt:
		for _, t := range a.Tables {
			if strings.EqualFold(t.Schema, "mysql") {
				a.Accounts = true // a direct write of the grant tables
			}
		}
	case *ast.SetStmt:
		a.Session = true
	}
	ac.add(a)
}

// unparsed adds a statement TiDB's parser cannot read: DDL that names its
// table plainly keeps to it; anything else may do anything.
func (ac *accounting) unparsed(sql string) {
	if a, ok := lexicalDDL(sql, ac.db); ok {
		ac.add(a)
		return
	}
	switch w := FirstKeyword(sql); {
	case eqFold(w, "BEGIN") || eqFold(w, "COMMIT") || eqFold(w, "ROLLBACK") || eqFold(w, "START") ||
		eqFold(w, "SAVEPOINT") || eqFold(w, "RELEASE"):
		// BEGIN WORK, COMMIT WORK AND CHAIN, ROLLBACK WORK, ...: they end
		// or start transactions and write no table.
		ac.none()
		return
	}
	ac.unknown(WhyUnparsed)
}

// lexical adds statements whose effect the first word decides.
func (ac *accounting) lexical(sql, w0 string) {
	switch {
	case eqFold(w0, "CHECK") || eqFold(w0, "SIGNAL") || eqFold(w0, "RESIGNAL") || eqFold(w0, "GET"):
		ac.none() // CHECK TABLE reads; SIGNAL and GET DIAGNOSTICS touch no table
	case eqFold(w0, "REPAIR"):
		if a, ok := lexicalDDL(sql, ac.db); ok {
			ac.add(a)
			return
		}
		ac.unknown(WhyUnparsed)
	default:
		ac.unknown(WhyOther)
	}
}

// accountWords marks statements that change accounts, privileges or the
// session's role, by their first words: GRANT, REVOKE, FLUSH, CREATE /
// ALTER / DROP / RENAME USER or ROLE, SET PASSWORD, SET DEFAULT ROLE; SET
// ROLE changes only the session's own rights. It reports whether the
// statement is one of these, which change no table's rows.
func (ac *accounting) accountWords(toks []sqllex.Token, text string) bool {
	var w [4]string
	for i := range w {
		if i < len(toks) && toks[i].Kind == sqllex.Word {
			w[i] = toks[i].Text(text)
		}
	}
	switch {
	case eqFold(w[0], "GRANT") || eqFold(w[0], "REVOKE") || eqFold(w[0], "FLUSH"):
		ac.out.Accounts = true
		return true
	case eqFold(w[0], "CREATE") || eqFold(w[0], "ALTER") || eqFold(w[0], "DROP") || eqFold(w[0], "RENAME"):
		for _, x := range w[1:] { // (CREATE OR REPLACE USER, DROP ROLE IF EXISTS)
			if eqFold(x, "USER") || eqFold(x, "ROLE") {
				ac.out.Accounts = true
				return true
			}
		}
	case eqFold(w[0], "SET"):
		ac.out.Session = true
		switch {
		case eqFold(w[1], "PASSWORD") || eqFold(w[1], "DEFAULT") && eqFold(w[2], "ROLE"):
			ac.out.Accounts = true
			return true
		case eqFold(w[1], "ROLE"):
			ac.out.Role = true
			return true
		}
	case eqFold(w[0], "USE"):
		ac.out.Session = true
	}
	return false
}

// block adds a compound statement, or a stored program's definition.
func (ac *accounting) block(text string, toks []sqllex.Token, s sqllex.Stmt, esc bool, depth int) {
	if len(toks) > 0 && toks[0].Is(text, "CREATE") {
		// A stored program: creating it changes no table, but what
		// writes to a table may now do (a trigger), so plugins that
		// follow views and triggers look again.
		if s.Unbalanced {
			ac.unknown(WhyBlock)
			return
		}
		ac.out.Programs = true
		ac.add(Analysis{Effect: EffectDDL})
		return
	}
	pieces, ok := sqllex.Body(text, toks)
	if !ok || s.Unbalanced || depth >= maxAccountDepth {
		ac.unknown(WhyBlock)
		return
	}
	ac.out.Session = true // (SET of variables inside)
	for _, p := range pieces {
		if p.Expr {
			ac.expression(text[p.Start:p.End])
			continue
		}
		ac.text(text[p.Start:p.End], esc, depth+1)
	}
}

// expression adds an expression the server evaluates: it reads the tables
// its subqueries name, and may write anything if it calls a stored
// function.
func (ac *accounting) expression(expr string) {
	if strings.TrimSpace(expr) == "" {
		return
	}
	pd := Parse("SELECT " + expr)
	defer pd.Release()
	stmts, err := pd.Stmts, pd.Err
	if err != nil || len(stmts) != 1 {
		ac.unknown(WhyUnparsed)
		return
	}
	if CallsUserFunction(stmts[0]) {
		ac.unknown(WhyUserFunction)
		return
	}
	ac.add(Analysis{Named: namedIn(stmts, ac.db)})
}

// setStatement adds SET STATEMENT var = value [, ...] FOR statement: the
// statement, with the settings' values read as expressions.
func (ac *accounting) setStatement(text string, toks []sqllex.Token, esc bool, depth int) {
	paren := 0
	for i := 2; i < len(toks); i++ {
		switch {
		case toks[i].IsPunct(text, "("):
			paren++
		case toks[i].IsPunct(text, ")"):
			paren--
		case paren == 0 && toks[i].Is(text, "FOR"):
			pd := Parse("SET " + text[toks[2].Start:toks[i].Start])
			if pd.Err != nil || len(pd.Stmts) != 1 {
				ac.unknown(WhyUnparsed)
			} else if CallsUserFunction(pd.Stmts[0]) {
				ac.unknown(WhyUserFunction)
			}
			pd.Release()
			if i+1 < len(toks) {
				ac.text(text[toks[i+1].Start:toks[len(toks)-1].End], esc, depth+1)
			}
			return
		}
	}
	ac.unknown(WhyUnparsed)
}

// literalText returns the text of a statement given as string literals
// (adjacent literals concatenate), or false.
func literalText(text string, toks []sqllex.Token, esc bool) (string, bool) {
	if len(toks) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, t := range toks {
		if t.Kind != sqllex.String {
			return "", false
		}
		s, ok := unquote(t.Text(text), esc)
		if !ok {
			return "", false
		}
		b.WriteString(s)
	}
	return b.String(), true
}

// executeImmediate adds EXECUTE IMMEDIATE expr: the statement its text
// holds, when the text is a literal.
func (ac *accounting) executeImmediate(text string, toks []sqllex.Token, esc bool, depth int) {
	ac.out.PerRequest = true
	if using := indexWord(text, toks, "USING"); using >= 0 {
		ac.expressions(text, toks[using+1:])
		toks = toks[:using]
	}
	inner, ok := literalText(text, toks, esc)
	if !ok {
		ac.dynamic()
		return
	}
	ac.nested(inner, esc, depth)
}

// nested adds the statements of a text the request hands to the server to
// run (EXECUTE IMMEDIATE, PREPARE), each listed as one of the request's.
// The server reads it in the same session, so with the same
// NO_BACKSLASH_ESCAPES as the request (esc: the reading being followed).
func (ac *accounting) nested(inner string, esc bool, depth int) {
	for _, r := range sqllex.Readings(inner, ac.dialect, esc) {
		ac.text(r, esc, depth+1)
	}
}

// dynamic adds a statement whose text the proxy cannot know.
func (ac *accounting) dynamic() {
	ac.out.Stmts = append(ac.out.Stmts, StmtInfo{Kind: KindOther, Dynamic: true})
	ac.unknown(WhyDynamicSQL)
}

// prepare adds PREPARE name FROM text: nothing runs yet; the session
// remembers what its EXECUTE will do.
func (ac *accounting) prepare(text string, toks []sqllex.Token, esc bool, depth int) {
	from := indexWord(text, toks, "FROM")
	if len(toks) < 4 || from != 2 {
		ac.unparsed(text)
		return
	}
	name := toks[1].Text(text)
	inner, ok := literalText(text, toks[3:], esc)
	sub := &accounting{dialect: ac.dialect, prepared: ac.prepared, pending: ac.pending, db: ac.db, first: true, work: ac.work}
	sub.out.IndexOnly = true
	if ok {
		sub.nested(inner, esc, depth)
	} else {
		sub.dynamic()
	}
	sub.out.prepared = nil
	ac.work = sub.work
	ac.setPrepared(name, &sub.out)
	// Its statements are listed with the request's (for rules on them),
	// though they run only at EXECUTE.
	for _, s := range sub.out.Stmts {
		s.Prepared = true
		ac.out.Stmts = append(ac.out.Stmts, s)
	}
	ac.none()
}

// setPrepared records that the request prepares name as a (nil:
// deallocates it).
func (ac *accounting) setPrepared(name string, a *Analysis) {
	key := preparedName(name)
	if ac.pending == nil {
		ac.pending = map[string]*Analysis{}
	}
	ac.pending[key] = a
	ac.out.PerRequest = true
	ac.out.prepared = append(ac.out.prepared, preparedChange{name: key, a: a})
}

// lookupPrepared is what EXECUTE name runs, as far as the account knows.
func (ac *accounting) lookupPrepared(name string) (Analysis, bool) {
	key := preparedName(name)
	if a, ok := ac.pending[key]; ok {
		if a == nil {
			return Analysis{}, false
		}
		return *a, true
	}
	if ac.prepared == nil {
		return Analysis{}, false
	}
	a, ok := ac.prepared.byName[key]
	return a, ok
}

// execute adds EXECUTE name [USING ...]: what the session prepared.
func (ac *accounting) execute(text string, toks []sqllex.Token) {
	ac.out.PerRequest = true
	if len(toks) < 2 {
		ac.unknown(WhyUnparsed)
		return
	}
	if using := indexWord(text, toks, "USING"); using >= 0 {
		ac.expressions(text, toks[using+1:])
	}
	a, ok := ac.lookupPrepared(toks[1].Text(text))
	if !ok {
		ac.out.Stmts = append(ac.out.Stmts, StmtInfo{Kind: KindOther, Dynamic: true})
		ac.unknown(WhyUnknownPrepared)
		return
	}
	ac.out.Stmts = append(ac.out.Stmts, a.Stmts...)
	a.Stmts, a.prepared = nil, nil
	ac.add(a)
}

// expressions adds a comma-separated list of expressions.
func (ac *accounting) expressions(text string, toks []sqllex.Token) {
	if len(toks) > 0 {
		ac.expression(text[toks[0].Start:toks[len(toks)-1].End])
	}
}

func (ac *accounting) none() { ac.add(Analysis{}) }

func (ac *accounting) unknown(why Conservative) {
	// Unparsed: the tables the request names are not all known (its text,
	// or part of it, was not read), so Named may lack some.
	unread := why == WhyUnparsed || why == WhyDynamicSQL || why == WhyUnknownPrepared || why == WhyBlock
	ac.add(Analysis{Effect: EffectUnknown, Why: why, TempsUnknown: true, Unparsed: unread})
}

// add merges one statement's account into the request's.
func (ac *accounting) add(a Analysis) {
	if a.Effect == EffectCache || a.Effect == EffectNoCache {
		ac.admin++
		if ac.first {
			ac.out.Effect, ac.out.Tables, ac.out.IndexOnly = a.Effect, a.Tables, false
		}
		ac.first = false
		return
	}
	ac.first = false
	out := &ac.out
	if a.Effect > out.Effect {
		out.Effect = a.Effect
	}
	if a.Effect == EffectUnknown && (out.Why == NotConservative || a.Why != NotConservative && out.Why == WhyOther) {
		out.Why = a.Why
	}
	out.Tables = appendUnique(out.Tables, a.Tables...)
	if a.Effect == EffectWrite {
		out.Written = appendUnique(out.Written, a.Tables...)
	}
	out.Targets = appendUnique(out.Targets, a.Targets...)
	out.Dropped = appendUnique(out.Dropped, a.Dropped...)
	if a.DropSchema != "" {
		out.DropSchema = a.DropSchema
	}
	out.TempCreated = append(out.TempCreated, a.TempCreated...)
	out.TempDropped = append(out.TempDropped, a.TempDropped...)
	out.TempsUnknown = out.TempsUnknown || a.TempsUnknown || a.Effect == EffectUnknown
	out.Named = appendUnique(out.Named, a.Named...)
	out.Unparsed = out.Unparsed || a.Unparsed
	out.IndexOnly = out.IndexOnly && a.IndexOnly
	out.Accounts = out.Accounts || a.Accounts || a.Effect == EffectUnknown
	out.Role = out.Role || a.Role
	out.Session = out.Session || a.Session || a.Effect == EffectUnknown
	out.Programs = out.Programs || a.Programs || a.Effect == EffectUnknown
}

// returningAt returns the index of the RETURNING of an INSERT, REPLACE or
// DELETE (outside parentheses), or -1.
func returningAt(text string, toks []sqllex.Token) int {
	if len(toks) == 0 || !(toks[0].Is(text, "INSERT") || toks[0].Is(text, "REPLACE") || toks[0].Is(text, "DELETE")) {
		return -1
	}
	return indexWord(text, toks, "RETURNING")
}

// selectIntoAt returns the index of the INTO of a SELECT ... INTO
// variables (not OUTFILE or DUMPFILE, which the parser reads), or -1.
func selectIntoAt(text string, toks []sqllex.Token) int {
	if len(toks) == 0 || !(toks[0].Is(text, "SELECT") || toks[0].Is(text, "WITH") || toks[0].IsPunct(text, "(")) {
		return -1
	}
	i := indexWord(text, toks, "INTO")
	if i < 0 || i+1 >= len(toks) || toks[i+1].Is(text, "OUTFILE") || toks[i+1].Is(text, "DUMPFILE") {
		return -1
	}
	return i
}

// intoEnd returns the index of the first token after INTO's variables.
func intoEnd(text string, toks []sqllex.Token, into int) int {
	i := into + 1
	for i < len(toks) {
		i++ // a variable
		if i < len(toks) && toks[i].IsPunct(text, ",") {
			i++
			continue
		}
		break
	}
	return i
}

func endOffset(toks []sqllex.Token, i, end int) int {
	if i < len(toks) {
		return toks[i].Start
	}
	return end
}

// indexWord returns the index of the first word w outside parentheses, or
// -1.
func indexWord(text string, toks []sqllex.Token, w string) int {
	paren := 0
	for i, t := range toks {
		switch {
		case t.IsPunct(text, "("):
			paren++
		case t.IsPunct(text, ")"):
			paren--
		case paren == 0 && t.Is(text, w):
			return i
		}
	}
	return -1
}

// unquote returns the value of a quoted string literal.
func unquote(lit string, esc bool) (string, bool) {
	if len(lit) < 2 || lit[len(lit)-1] != lit[0] {
		return "", false
	}
	q := lit[0]
	body := lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == q && i+1 < len(body) && body[i+1] == q:
			b.WriteByte(q)
			i++
		case esc && c == '\\' && i+1 < len(body):
			i++
			switch body[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'Z':
				b.WriteByte(26)
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(body[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// preparedTexts are a session's SQL-level prepared statements (PREPARE
// name FROM ...), by name, as accounts.
type preparedTexts struct {
	byName map[string]Analysis
}

// preparedKey is the session-state key of a session's preparedTexts.
type preparedKey struct{}

func sessionPrepared(s *SessionState) *preparedTexts {
	if s == nil {
		return nil
	}
	if p, ok := s.Get(preparedKey{}).(*preparedTexts); ok {
		return p
	}
	p := &preparedTexts{byName: map[string]Analysis{}}
	s.Set(preparedKey{}, p)
	return p
}

// preparedName is the key of a prepared statement's name: names are
// case-insensitive.
func preparedName(name string) string { return strings.ToLower(strings.Trim(name, "`")) }

// preparedChange is a PREPARE (a set) or DEALLOCATE (a nil) of a request.
type preparedChange struct {
	name string
	a    *Analysis
}

// apply records the request's PREPAREs and DEALLOCATEs once the backend has
// run it. When the request failed, any of them may not have run: a name
// prepared anew may still hold its old text, so it is kept as both
// (the union of the two accounts), and a deallocated one is kept.
func (p *preparedTexts) apply(changes []preparedChange, failed bool) {
	for _, c := range changes {
		old, had := p.byName[c.name]
		switch {
		case c.a == nil && !failed:
			delete(p.byName, c.name)
		case c.a == nil:
		case failed && had:
			both := &accounting{out: old}
			both.add(*c.a)
			both.out.Stmts = append(both.out.Stmts, c.a.Stmts...)
			p.byName[c.name] = both.out
		default:
			p.byName[c.name] = *c.a
		}
	}
}

// lexicalDDL reads the tables of a DDL statement the parser cannot read
// (CREATE TABLE ... WITH SYSTEM VERSIONING, CREATE OR REPLACE TABLE,
// REPAIR TABLE, ...) from its first words: CREATE [OR REPLACE]
// [TEMPORARY] TABLE [IF NOT EXISTS] t, ALTER [ONLINE] [IGNORE] TABLE t,
// DROP [TEMPORARY] TABLE [IF EXISTS] t[, ...], TRUNCATE [TABLE] t, RENAME
// TABLE a TO b[, ...], REPAIR / OPTIMIZE / ANALYZE [NO_WRITE_TO_BINLOG |
// LOCAL] TABLE t[, ...], CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX i ON t.
// It reports false for anything else.
func lexicalDDL(sql, db string) (Analysis, bool) {
	toks := sqllex.Tokens(sql, true)
	i := 0
	at := func(ws ...string) bool {
		for _, w := range ws {
			if i < len(toks) && toks[i].Is(sql, w) {
				i++
				return true
			}
		}
		return false
	}
	// name reads [schema.]table at i.
	name := func() (TableID, bool) {
		part := func() (string, bool) {
			if i >= len(toks) {
				return "", false
			}
			t := toks[i]
			switch t.Kind {
			case sqllex.Word:
				i++
				return t.Text(sql), true
			case sqllex.Ident:
				i++
				return strings.ReplaceAll(sql[t.Start+1:t.End-1], "``", "`"), true
			}
			return "", false
		}
		first, ok := part()
		if !ok {
			return TableID{}, false
		}
		if i+1 < len(toks) && toks[i].IsPunct(sql, ".") {
			i++
			second, ok := part()
			if !ok {
				return TableID{}, false
			}
			return TableID{Schema: strings.Clone(first), Table: strings.Clone(second)}, true
		}
		return TableID{Schema: strings.Clone(db), Table: strings.Clone(first)}, true
	}
	list := func(sep string) ([]TableID, bool) {
		var out []TableID
		for {
			t, ok := name()
			if !ok {
				return nil, false
			}
			out = append(out, t)
			if sep != "" && at(sep) {
				continue // RENAME TABLE a TO b
			}
			if i < len(toks) && toks[i].IsPunct(sql, ",") {
				i++
				continue
			}
			return out, true
		}
	}
	ddl := func(ts []TableID) Analysis {
		return Analysis{Effect: EffectDDL, Tables: ts, Targets: ts, Named: ts}
	}
	switch {
	case at("CREATE"):
		if at("OR") && !at("REPLACE") {
			return Analysis{}, false
		}
		temporary := at("TEMPORARY")
		if at("UNIQUE", "FULLTEXT", "SPATIAL"); at("INDEX") {
			if _, ok := name(); !ok || !at("ON") {
				return Analysis{}, false
			}
			t, ok := name()
			if !ok {
				return Analysis{}, false
			}
			a := ddl([]TableID{t})
			a.IndexOnly = true
			return a, true
		}
		if !at("TABLE") {
			return Analysis{}, false
		}
		if at("IF") && !(at("NOT") && at("EXISTS")) {
			return Analysis{}, false
		}
		t, ok := name()
		if !ok {
			return Analysis{}, false
		}
		if temporary {
			return Analysis{Effect: EffectNone, TempCreated: []TableID{t}, Named: []TableID{t}}, true
		}
		return ddl([]TableID{t}), true
	case at("ALTER"):
		at("ONLINE")
		if at("IGNORE"); !at("TABLE") {
			return Analysis{}, false
		}
		t, ok := name()
		if !ok {
			return Analysis{}, false
		}
		a := ddl([]TableID{t})
		a.TempsUnknown = true // (it may rename a temporary table)
		return a, true
	case at("DROP"):
		temporary := at("TEMPORARY")
		if !at("TABLE", "TABLES") {
			return Analysis{}, false
		}
		if at("IF") && !at("EXISTS") {
			return Analysis{}, false
		}
		ts, ok := list("")
		if !ok {
			return Analysis{}, false
		}
		if temporary {
			return Analysis{Effect: EffectNone, TempDropped: ts, Named: ts}, true
		}
		a := ddl(ts)
		a.TempDropped, a.Dropped = ts, ts
		return a, true
	case at("TRUNCATE"):
		at("TABLE")
		t, ok := name()
		if !ok {
			return Analysis{}, false
		}
		return ddl([]TableID{t}), true
	case at("RENAME"):
		if !at("TABLE", "TABLES") {
			return Analysis{}, false
		}
		ts, ok := list("TO")
		if !ok {
			return Analysis{}, false
		}
		a := ddl(ts)
		a.TempsUnknown = true
		var from, to []TableID
		for i := 0; i+1 < len(ts); i += 2 { // (a TO b, c TO d)
			from, to = append(from, ts[i]), append(to, ts[i+1])
		}
		a.Dropped = renamedAway(from, to)
		return a, true
	case at("REPAIR", "OPTIMIZE", "ANALYZE"):
		at("NO_WRITE_TO_BINLOG", "LOCAL")
		if !at("TABLE", "TABLES") {
			return Analysis{}, false
		}
		ts, ok := list("")
		if !ok {
			return Analysis{}, false
		}
		return ddl(ts), true
	}
	return Analysis{}, false
}
