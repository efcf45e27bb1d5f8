package plugins

import (
	"strings"

	"tableproxy/internal/sqllex"
)

// Kind is a cheap lexical classification of a statement, from its first
// keyword. It is computed for every statement, so it reads a few bytes and
// never parses; plugins that need more call Statement.Normalized,
// Statement.Parsed or Statement.Analysis.
type Kind uint8

const (
	KindOther Kind = iota
	KindSelect
	KindInsert
	KindUpdate
	KindDelete
	KindReplace
	KindLoad     // LOAD DATA / LOAD XML
	KindDDL      // CREATE, ALTER, DROP, RENAME, TRUNCATE
	KindBegin    // BEGIN, START TRANSACTION
	KindCommit   // COMMIT
	KindRollback // ROLLBACK (including to a savepoint)
	KindSet      // SET
	KindUse      // USE
	KindShow     // SHOW, DESCRIBE, EXPLAIN
	KindCall     // CALL
	KindKill     // KILL
	KindAdmin    // ADMIN (the proxy's own admin SQL)
	KindWith     // WITH ... (a CTE; usually a read)
	KindMulti    // a request of several statements
	KindCompound // a compound statement: BEGIN NOT ATOMIC, IF, CASE, LOOP, REPEAT, WHILE, FOR
	numKinds
)

// NumKinds is the number of kinds, for tables indexed by Kind.
const NumKinds = int(numKinds)

var kindNames = [numKinds]string{
	"other", "select", "insert", "update", "delete", "replace", "load", "ddl",
	"begin", "commit", "rollback", "set", "use", "show", "call", "kill", "admin", "with",
	"multi", "compound",
}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "other"
}

// IsWrite reports whether statements of this kind change data.
func (k Kind) IsWrite() bool {
	switch k {
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindLoad, KindDDL:
		return true
	}
	return false
}

// ClassifyFor returns the kind of sql as a backend of dialect d reads it:
// its executable comments run or skipped as d does (see Classify). When the
// dialect is unknown and the readings disagree, the kind is KindOther.
func ClassifyFor(sql string, d sqllex.Dialect) Kind {
	if !sqllex.HasExecComments(sql) {
		return Classify(sql)
	}
	rs := sqllex.Readings(sql, d, true)
	k := Classify(rs[0])
	for _, r := range rs[1:] {
		if Classify(r) != k {
			return KindOther
		}
	}
	return k
}

// Classify returns the kind of sql from its first keyword, skipping leading
// whitespace, comments (/* */, -- and #) and opening parentheses. MySQL's
// executable comments (/*! ... */) are read as code (ClassifyFor reads them
// as the backend does). A request of several statements is KindMulti, a
// compound statement KindCompound, and SET STATEMENT ... FOR KindOther:
// none of them is what its first word says.
func Classify(sql string) Kind {
	k := classifyFirst(sql)
	if strings.IndexByte(sql, ';') >= 0 && !SingleStatement(sql) {
		// (A ';' in a string or inside a compound statement does not end
		// a statement: count them as the backend does.)
		toks := sqllex.Tokens(sql, true)
		if ss := sqllex.Split(sql, toks); len(ss) > 1 {
			return KindMulti
		} else if len(ss) == 1 && ss[0].Block && k != KindDDL {
			return KindCompound
		}
	}
	return k
}

// classifyFirst is Classify of a single statement.
func classifyFirst(sql string) Kind {
	word, end := wordAt(sql, 0)
	if word != "" {
		// A label ("l: LOOP ...") starts a compound statement.
		j := end
		for j < len(sql) && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\n' || sql[j] == '\r') {
			j++
		}
		if j < len(sql) && sql[j] == ':' && (j+1 == len(sql) || sql[j+1] != '=') {
			return KindCompound
		}
	}
	switch len(word) {
	case 2:
		if eqFold(word, "IF") {
			return KindCompound
		}
	case 3:
		switch {
		case eqFold(word, "SET"):
			if eqFold(secondKeyword(sql), "STATEMENT") {
				return KindOther // SET STATEMENT ... FOR statement
			}
			return KindSet
		case eqFold(word, "FOR"):
			return KindCompound
		case eqFold(word, "USE"):
			return KindUse
		}
	case 4:
		switch {
		case eqFold(word, "DROP"):
			return KindDDL
		case eqFold(word, "SHOW"), eqFold(word, "DESC"):
			return KindShow
		case eqFold(word, "LOAD"):
			return KindLoad
		case eqFold(word, "CALL"):
			return KindCall
		case eqFold(word, "KILL"):
			return KindKill
		case eqFold(word, "WITH"):
			return KindWith
		case eqFold(word, "CASE"), eqFold(word, "LOOP"):
			return KindCompound
		}
	case 5:
		switch {
		case eqFold(word, "ALTER"):
			return KindDDL
		case eqFold(word, "BEGIN"):
			if eqFold(secondKeyword(sql), "NOT") {
				return KindCompound // BEGIN NOT ATOMIC
			}
			return KindBegin
		case eqFold(word, "WHILE"):
			return KindCompound
		case eqFold(word, "START"):
			// START TRANSACTION, not START SLAVE / REPLICA / GROUP_REPLICATION.
			if eqFold(secondKeyword(sql), "TRANSACTION") {
				return KindBegin
			}
		case eqFold(word, "ADMIN"):
			return KindAdmin
		}
	case 6:
		switch {
		case eqFold(word, "SELECT"):
			return KindSelect
		case eqFold(word, "INSERT"):
			return KindInsert
		case eqFold(word, "UPDATE"):
			return KindUpdate
		case eqFold(word, "DELETE"):
			return KindDelete
		case eqFold(word, "CREATE"), eqFold(word, "RENAME"):
			return KindDDL
		case eqFold(word, "COMMIT"):
			return KindCommit
		case eqFold(word, "REPEAT"):
			return KindCompound
		}
	case 7:
		switch {
		case eqFold(word, "REPLACE"):
			return KindReplace
		case eqFold(word, "EXPLAIN"):
			return KindShow
		}
	case 8:
		switch {
		case eqFold(word, "ROLLBACK"):
			return KindRollback
		case eqFold(word, "TRUNCATE"), eqFold(word, "DESCRIBE"):
			if eqFold(word, "TRUNCATE") {
				return KindDDL
			}
			return KindShow
		}
	}
	return KindOther
}

// FirstKeyword returns the first word of sql (letters, digits, '_'), after
// whitespace, comments and opening parentheses.
func FirstKeyword(sql string) string {
	w, _ := wordAt(sql, 0)
	return w
}

// secondKeyword returns the word after the first one.
func secondKeyword(sql string) string {
	_, i := wordAt(sql, 0)
	w, _ := wordAt(sql, i)
	return w
}

// wordAt returns the word of sql that starts at i, past whitespace,
// comments and '(', and where it ends.
func wordAt(sql string, i int) (string, int) {
	i = skipNoise(sql, i)
	j := i
	for j < len(sql) && isWordByte(sql[j]) {
		j++
	}
	return sql[i:j], j
}

// SingleStatement reports whether sql has no ';' before its end (trailing
// white space and one final ';' aside).
func SingleStatement(sql string) bool {
	s := strings.TrimRight(sql, " \t\r\n")
	s = strings.TrimSuffix(s, ";")
	return !strings.Contains(s, ";")
}

// skipNoise skips whitespace, comments and '(' from i.
func skipNoise(s string, i int) int {
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(' || c == ';':
			i++
		case c == '#':
			i = skipLine(s, i)
		case c == '-' && i+2 < len(s) && s[i+1] == '-' && s[i+2] <= ' ':
			// "-- " starts a comment when followed by any whitespace or
			// control character.
			i = skipLine(s, i)
		case c == '-' && i+2 == len(s) && s[i+1] == '-':
			return len(s)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if i+2 < len(s) && s[i+2] == '!' || i+3 < len(s) && s[i+2] == 'M' && s[i+3] == '!' {
				// Executable comment: /*!50100 CODE */ (and MariaDB's
				// /*M!100100 CODE */) runs CODE. Skip the marker and the
				// version digits and read on as code.
				if s[i+2] == 'M' {
					i += 4
				} else {
					i += 3
				}
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				continue
			}
			end := indexFrom(s, i+2, "*/")
			if end < 0 {
				return len(s)
			}
			i = end + 2
		default:
			return i
		}
	}
	return i
}

func skipLine(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i
}

func indexFrom(s string, from int, sub string) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// eqFold compares an ASCII word with an upper-case keyword.
var eqFold = sqllex.EqFold

// MayChangeAccounts reports whether the statement may change the
// backend's accounts or what they may do (see Analysis.Accounts). A plain
// statement of a kind that cannot (a single SELECT, SHOW, USE, BEGIN,
// COMMIT, ROLLBACK, KILL, or a row write of a table outside the mysql
// schema) is decided from its kind, without parsing; SET by its first
// words; anything else by its account.
func (st *Statement) MayChangeAccounts() bool {
	switch st.Kind {
	case KindSelect, KindWith, KindShow, KindUse, KindBegin, KindCommit, KindRollback, KindKill, KindAdmin:
		// (A stored function cannot run GRANT or CREATE USER: they commit.)
		return false
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindLoad:
		if !ContainsFold(st.SQL, "MYSQL") {
			return false
		}
	case KindSet:
		if sqllex.HasExecComments(st.SQL) {
			break // its words as the backend reads them: the account's
		}
		var words [3]string
		i := 0
		for n := range words {
			words[n], i = wordAt(st.SQL, i)
		}
		return eqFold(words[1], "PASSWORD") || eqFold(words[1], "DEFAULT") && eqFold(words[2], "ROLE")
	}
	a, _ := st.Analysis()
	return a.Accounts
}
