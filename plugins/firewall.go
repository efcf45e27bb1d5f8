package plugins

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/internal/sqllex"
)

type firewallOptions struct {
	// Mode is "deny" (the default): a statement matching a rule is refused.
	Mode  string    `json:"mode"`
	Rules []Options `json:"rules"` // decoded one by one so errors name the rule
}

type firewallRuleOptions struct {
	Name    string   `json:"name"`
	Users   []string `json:"users"`   // empty or "*": everyone
	Digest  string   `json:"digest"`  // a Statement.Digest() or a statement to take it from
	Pattern string   `json:"pattern"` // Go regexp on the raw text, case-insensitive unless it says (?-i)
	Kinds   []string `json:"kinds"`   // Kind names
	Message string   `json:"message"` // appended to the error the client gets
}

type firewallMode uint8

const (
	// modeDeny refuses statements that match a rule. An allow-list mode
	// would refuse those that match none; decide is where it would go.
	modeDeny firewallMode = iota
)

// firewallRule is one rule, compiled. Its conditions are checked cheapest
// first: kinds, then pattern, then digest.
type firewallRule struct {
	name     string
	everyone bool
	users    []string
	kinds    uint32 // a bit per Kind; 0 when kinds is not a condition
	pattern  *regexp.Regexp
	literal  string // text every match of pattern contains (lower case if fold); may be ""
	fold     bool   // literal is matched case-insensitively
	digest   string // lower-case hex; "" when digest is not a condition
	refusal  mysql.MyError
	blocked  atomic.Uint64
	counter  prometheus.Counter // nil without a metrics registry
}

// firewall refuses statements that match its rules.
//
// Kinds and digests describe what the server would run, and the text can
// make the server run something other than what it seems to say: a
// versioned comment /*!99999 SELECT */ is skipped by an older server (which
// then runs what follows), MariaDB runs /*M!100100 ... */ that every other
// reader skips, and with multi-statements "SELECT 1; DROP TABLE t" is two
// statements. So when a statement has executable comments or more than one
// statement, rules on kinds and digests are also tried against each way a
// server could read it (see newReadings), and a rule matches if any reading
// matches. Patterns always see the raw text, so a pattern is only as strong
// as the regexp: DROP/**/TABLE is not matched by `drop\s+table`.
type firewall struct {
	mode     firewallMode
	rules    []*firewallRule            // config order
	everyone []*firewallRule            // the rules for users no rule names
	byUser   map[string][]*firewallRule // the rules for each named user, in config order
}

func newFirewall(opts Options, env Env) (Plugin, error) {
	var o firewallOptions
	if err := DecodeOptions(opts, &o); err != nil {
		return nil, err
	}
	f := &firewall{byUser: map[string][]*firewallRule{}}
	switch strings.ToLower(o.Mode) {
	case "", "deny":
		f.mode = modeDeny
	default:
		return nil, fmt.Errorf("mode: unknown mode %q (supported: deny)", o.Mode)
	}
	if len(o.Rules) == 0 {
		return nil, fmt.Errorf("rules: no rules given")
	}
	seen := map[string]int{}
	for i, ro := range o.Rules {
		r, err := compileRule(ro)
		if err != nil {
			if r != nil && r.name != "" {
				return nil, fmt.Errorf("rules[%d] (%s): %w", i, r.name, err)
			}
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		if j, dup := seen[r.name]; dup {
			return nil, fmt.Errorf("rules[%d] (%s): name: already used by rules[%d]", i, r.name, j)
		}
		seen[r.name] = i
		f.rules = append(f.rules, r)
	}

	for _, r := range f.rules {
		if r.everyone {
			f.everyone = append(f.everyone, r)
		}
		for _, u := range r.users {
			f.byUser[u] = nil
		}
	}
	for u := range f.byUser {
		var rs []*firewallRule
		for _, r := range f.rules {
			if r.everyone || slices.Contains(r.users, u) {
				rs = append(rs, r)
			}
		}
		f.byUser[u] = rs
	}

	if env.Metrics != nil {
		vec, err := registerOrReuse(env.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tableproxy_firewall_blocked_total",
			Help: "Statements refused by the firewall, by rule.",
		}, []string{"rule"}))
		if err != nil {
			return nil, err
		}
		for _, r := range f.rules {
			r.counter = vec.WithLabelValues(r.name)
		}
	}
	return f, nil
}

// compileRule checks and compiles one rule. On error it returns the rule as
// far as it got, so the caller can name it.
func compileRule(opts Options) (*firewallRule, error) {
	var ro firewallRuleOptions
	if err := DecodeOptions(opts, &ro); err != nil {
		return nil, err
	}
	r := &firewallRule{name: strings.TrimSpace(ro.Name)}
	if r.name == "" {
		return r, fmt.Errorf("name: required")
	}

	for j, u := range ro.Users {
		switch u {
		case "*":
			r.everyone = true
		case "":
			return r, fmt.Errorf("users[%d]: empty user name", j)
		default:
			r.users = append(r.users, u)
		}
	}
	if len(ro.Users) == 0 {
		r.everyone = true
	}
	if r.everyone {
		r.users = nil
	}

	for j, name := range ro.Kinds {
		k, ok := kindByName(name)
		if !ok {
			return r, fmt.Errorf("kinds[%d]: unknown kind %q (known: %s)", j, name, strings.Join(kindNames[:], ", "))
		}
		r.kinds |= 1 << k
	}

	if ro.Pattern != "" {
		re, err := regexp.Compile("(?i)" + ro.Pattern)
		if err != nil {
			return r, fmt.Errorf("pattern: %w", err)
		}
		r.pattern = re
		r.literal, r.fold = requiredLiteral("(?i)" + ro.Pattern)
	}

	if d := strings.TrimSpace(ro.Digest); d != "" {
		if isHexDigest(d) {
			r.digest = strings.ToLower(d)
		} else {
			norm, dg := parser.NormalizeDigest(d)
			if norm == "" {
				return r, fmt.Errorf("digest: %q is neither a digest nor a statement", ro.Digest)
			}
			r.digest = dg.String()
		}
	}

	if r.kinds == 0 && r.pattern == nil && r.digest == "" {
		return r, fmt.Errorf("needs at least one of digest, pattern or kinds")
	}

	msg := "Access denied: statement blocked by tableproxy firewall rule '" + r.name + "'"
	if m := strings.TrimSpace(ro.Message); m != "" {
		msg += ": " + m
	}
	r.refusal = mysql.MyError{Code: mysql.ER_ACCESS_DENIED_ERROR, State: "28000", Message: msg}
	return r, nil
}

func kindByName(name string) (Kind, bool) {
	for k, n := range kindNames {
		if strings.EqualFold(n, name) {
			return Kind(k), true
		}
	}
	return 0, false
}

// isHexDigest reports whether s looks like a Statement.Digest (a SHA-256 in
// hex) rather than a statement.
func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (f *firewall) Name() string { return "firewall" }

// OnStatement refuses st if a rule for its user matches.
func (f *firewall) OnStatement(st *Statement) Action {
	rules := f.everyone
	if rs, ok := f.byUser[st.User]; ok {
		rules = rs
	}
	if len(rules) == 0 {
		return Continue
	}
	return f.decide(firstMatchingRule(st, rules))
}

func (f *firewall) decide(r *firewallRule) Action {
	if r == nil { // modeDeny is the only mode
		return Continue
	}
	r.blocked.Add(1)
	if r.counter != nil {
		r.counter.Inc()
	}
	e := r.refusal // a copy per refusal, so no session shares one error value
	return RefuseWith(&e)
}

// Blocked returns how many statements each rule has refused.
func (f *firewall) Blocked() map[string]uint64 {
	m := make(map[string]uint64, len(f.rules))
	for _, r := range f.rules {
		m[r.name] = r.blocked.Load()
	}
	return m
}

// firstMatchingRule returns the first of rules that matches st, or nil:
// st as sent, any way a server could read it (see newReadings), or any
// statement its account says it runs (inside SET STATEMENT, compound
// statements, EXECUTE IMMEDIATE, a PREPAREd text).
func firstMatchingRule(st *Statement, rules []*firewallRule) *firewallRule {
	var rd *stmtReadings // computed on first need
	var run []StmtInfo
	accounted := false
	for _, r := range rules {
		if r.matches(st) {
			return r
		}
		if !accounted {
			run, accounted = accountedStmts(st), true
		}
		for i := range run {
			if r.matchesRun(&run[i]) {
				return r
			}
		}
		if r.kinds == 0 && r.digest == "" {
			continue // a pattern-only rule sees the raw text, already tried
		}
		if rd == nil {
			rd = newReadings(st.SQL)
		}
		if rd.matches(r, st.SQL) {
			return r
		}
	}
	return nil
}

// accountedStmts are the statements st runs by its account, or nil when
// st is one plain statement that is what it says (the usual case, decided
// without parsing).
func accountedStmts(st *Statement) []StmtInfo {
	switch st.Kind {
	case KindOther, KindMulti, KindCompound, KindCall:
	default:
		if !sqllex.HasExecComments(st.SQL) {
			return nil
		}
	}
	a, _ := st.Analysis()
	return a.Stmts
}

// matchesRun reports whether r matches one statement a request runs. A
// statement whose text is known only when it runs (EXECUTE IMMEDIATE of
// an expression, EXECUTE of a text prepared from a variable) matches every
// rule: the firewall fails closed.
func (r *firewallRule) matchesRun(s *StmtInfo) bool {
	if s.Dynamic {
		return true
	}
	if r.kinds != 0 && r.kinds&(1<<s.Kind) == 0 {
		return false
	}
	if r.pattern != nil && !r.patternMatches(s.SQL) {
		return false
	}
	if r.digest != "" {
		_, d := parser.NormalizeDigest(s.SQL)
		return d.String() == r.digest
	}
	return true
}

func (r *firewallRule) matches(st *Statement) bool {
	if r.kinds != 0 && r.kinds&(1<<st.Kind) == 0 {
		return false
	}
	if r.pattern != nil && !r.patternMatches(st.SQL) {
		return false
	}
	return r.digest == "" || st.Digest() == r.digest
}

// patternMatches runs the pattern, unless the statement lacks its required
// literal. Go's regexp finds a literal prefix fast, but not under (?i), the
// default here, where a miss costs about 1 µs on a short statement; the
// literal test costs a few ns per byte.
func (r *firewallRule) patternMatches(sql string) bool {
	if r.literal != "" {
		if r.fold {
			if !mayContainFold(sql, r.literal) {
				return false
			}
		} else if !strings.Contains(sql, r.literal) {
			return false
		}
	}
	return r.pattern.MatchString(sql)
}

// requiredLiteral returns the longest ASCII literal that every match of
// pattern must contain, and whether it is matched case-insensitively (then
// it is returned in lower case). It returns "" when it finds none.
func requiredLiteral(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	lit, fold := required(re.Simplify())
	if len(lit) < 2 {
		return "", false
	}
	b := make([]byte, len(lit))
	for i, c := range lit {
		if c >= 0x80 {
			return "", false
		}
		if fold && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = byte(c)
	}
	return string(b), fold
}

func required(re *syntax.Regexp) ([]rune, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return re.Rune, re.Flags&syntax.FoldCase != 0
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []rune
		var fold bool
		for _, sub := range re.Sub {
			if lit, f := required(sub); len(lit) > len(best) {
				best, fold = lit, f
			}
		}
		return best, fold
	}
	return nil, false
}

// mayContainFold reports whether s may contain lit (ASCII, lower case) under
// the regexp package's case folding. That folding also maps 'k' and 's' to
// the Kelvin sign and the long s, so any non-ASCII byte answers yes.
func mayContainFold(s, lit string) bool {
	n := len(lit)
	c0 := lit[0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return true
		}
		if lowerASCII(c) != c0 || i+n > len(s) {
			continue
		}
		j := 1
		for j < n && lowerASCII(s[i+j]) == lit[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Limits on the work spent reading an ambiguous statement. The work grows
// with the length of the request times the number of distinct versions in
// its executable comments, so versions are capped hard; statements are
// capped only to bound memory. A request beyond either limit matches every
// rule on kinds or digests: the firewall fails closed.
const (
	maxReadingVersions = 8
	maxReadings        = 100_000
)

// stmtReadings are the single statements a server could run for one
// request, other than the request read as one statement as written.
type stmtReadings struct {
	tooMany bool
	views   []stmtView
}

type stmtView struct {
	sql    string
	kind   Kind
	digest string // computed on first need
}

var noReadings = &stmtReadings{}

// newReadings returns the other readings of sql. The usual statement has no
// ';' and no executable comment, which two fast scans establish without
// allocating.
func newReadings(sql string) *stmtReadings {
	if strings.IndexByte(sql, ';') < 0 && !hasExecMarker(sql) {
		return noReadings
	}
	rd := &stmtReadings{}
	seen := map[string]bool{sql: true}
	escapes := []bool{true}
	if strings.IndexByte(sql, '\\') >= 0 {
		// Whether backslash escapes a quote depends on the session's
		// sql_mode (NO_BACKSLASH_ESCAPES), which the proxy does not track.
		escapes = append(escapes, false)
	}
	for _, esc := range escapes {
		execs, _ := scanSQL(sql, esc)
		texts, ok := execReadings(sql, execs)
		if !ok {
			rd.tooMany = true
			return rd
		}
		for _, text := range texts {
			_, semis := scanSQL(text, esc)
			prev := 0
			for _, end := range append(semis, len(text)) {
				piece := strings.TrimSpace(text[prev:end])
				prev = end + 1
				if skipNoise(piece, 0) == len(piece) || seen[piece] {
					continue
				}
				seen[piece] = true
				if len(rd.views) == maxReadings {
					rd.tooMany = true
					return rd
				}
				rd.views = append(rd.views, stmtView{sql: piece, kind: Classify(piece)})
			}
		}
	}
	return rd
}

func (rd *stmtReadings) matches(r *firewallRule, raw string) bool {
	if rd.tooMany {
		return r.pattern == nil || r.patternMatches(raw)
	}
	for i := range rd.views {
		v := &rd.views[i]
		if r.kinds != 0 && r.kinds&(1<<v.kind) == 0 {
			continue
		}
		if r.pattern != nil && !r.patternMatches(raw) {
			return false // the same for every reading
		}
		if r.digest != "" {
			if v.digest == "" {
				_, d := parser.NormalizeDigest(v.sql)
				v.digest = d.String()
			}
			if v.digest != r.digest {
				continue
			}
		}
		return true
	}
	return false
}

// hasExecMarker reports whether sql contains "/*!" or "/*M!".
func hasExecMarker(sql string) bool {
	for i := 0; ; {
		j := strings.Index(sql[i:], "/*")
		if j < 0 {
			return false
		}
		i += j + 2
		if i < len(sql) && (sql[i] == '!' || sql[i] == 'M' && i+1 < len(sql) && sql[i+1] == '!') {
			return true
		}
	}
}

// execComment is a /*!NNNNN code */ or /*M!NNNNNN code */ span.
type execComment struct {
	start, code, codeEnd, end int
	version                   int // -1 when none is given
	maria                     bool
}

// scanSQL finds the executable comments and the statement separators of
// sql, skipping quoted strings and identifiers and ordinary comments.
func scanSQL(s string, backslashEscapes bool) (execs []execComment, semis []int) {
	cur := -1 // index in execs of the comment being read as code
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = sqllex.SkipQuoted(s, i, backslashEscapes && c != '`')
		case c == '#':
			i = skipLine(s, i)
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' '):
			i = skipLine(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			marker := 0
			if i+2 < len(s) && s[i+2] == '!' {
				marker = 3
			} else if i+3 < len(s) && s[i+2] == 'M' && s[i+3] == '!' {
				marker = 4
			}
			if marker == 0 || cur >= 0 {
				end := indexFrom(s, i+2, "*/")
				if end < 0 {
					i = len(s)
				} else {
					i = end + 2
				}
				continue
			}
			e := execComment{start: i, version: -1, maria: marker == 4}
			j := i + marker
			k := j
			for k < len(s) && k-j < 6 && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			if k > j {
				e.version, _ = strconv.Atoi(s[j:k])
			}
			e.code = k
			execs = append(execs, e)
			cur = len(execs) - 1
			i = k
		case c == '*' && cur >= 0 && i+1 < len(s) && s[i+1] == '/':
			execs[cur].codeEnd, execs[cur].end = i, i+2
			cur = -1
			i += 2
		case c == ';':
			semis = append(semis, i)
			i++
		default:
			i++
		}
	}
	if cur >= 0 {
		execs[cur].codeEnd, execs[cur].end = len(s), len(s)
	}
	return execs, semis
}

// execReadings returns sql as each server flavor and version could read its
// executable comments: MySQL runs /*!V code */ when its version is at least
// V and never runs /*M! */; MariaDB runs both by the same version rule. It
// reports false when there are too many versions to try.
func execReadings(sql string, execs []execComment) ([]string, bool) {
	if len(execs) == 0 {
		return []string{sql}, true
	}
	thresholds := []int{-1}
	for _, e := range execs {
		if e.version >= 0 && !slices.Contains(thresholds, e.version) {
			thresholds = append(thresholds, e.version)
		}
	}
	if len(thresholds) > maxReadingVersions+1 {
		return nil, false
	}
	var texts []string
	var b strings.Builder
	for _, maria := range []bool{false, true} {
		for _, t := range thresholds {
			b.Reset()
			prev := 0
			for _, e := range execs {
				b.WriteString(sql[prev:e.start])
				b.WriteByte(' ')
				if (maria || !e.maria) && e.version <= t {
					b.WriteString(sql[e.code:e.codeEnd])
					b.WriteByte(' ')
				}
				prev = e.end
			}
			b.WriteString(sql[prev:])
			if s := b.String(); !slices.Contains(texts, s) {
				texts = append(texts, s)
			}
		}
	}
	return texts, true
}
