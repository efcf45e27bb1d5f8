package plugins

import "strings"

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
	numKinds
)

// NumKinds is the number of kinds, for tables indexed by Kind.
const NumKinds = int(numKinds)

var kindNames = [numKinds]string{
	"other", "select", "insert", "update", "delete", "replace", "load", "ddl",
	"begin", "commit", "rollback", "set", "use", "show", "call", "kill", "admin", "with",
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

// Classify returns the kind of sql from its first keyword, skipping leading
// whitespace, comments (/* */, -- and #) and opening parentheses. MySQL's
// executable comments (/*! ... */) are read as code.
func Classify(sql string) Kind {
	word := FirstKeyword(sql)
	switch len(word) {
	case 3:
		switch {
		case eqFold(word, "SET"):
			return KindSet
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
		}
	case 5:
		switch {
		case eqFold(word, "ALTER"):
			return KindDDL
		case eqFold(word, "BEGIN"):
			return KindBegin
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
func eqFold(word, upper string) bool {
	if len(word) != len(upper) {
		return false
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != upper[i] {
			return false
		}
	}
	return true
}

// MayChangeAccounts reports whether sql may change the backend's accounts
// or what they may do: GRANT, REVOKE, FLUSH (PRIVILEGES); CREATE, ALTER,
// DROP or RENAME of a USER or ROLE; SET PASSWORD or SET DEFAULT ROLE; a
// CALL or EXECUTE (which may run any of them); and anything whose first
// word cannot be read (an executable comment) or that holds several
// statements. SET ROLE changes only the session's own rights.
func MayChangeAccounts(sql string) bool {
	if !SingleStatement(sql) {
		return true
	}
	// (Compared in place with eqFold: this runs for every query, and
	// upper-casing the words would allocate.)
	var words [4]string
	i := 0
	for n := range words {
		words[n], i = wordAt(sql, i)
	}
	switch w := words[0]; {
	case w == "" || eqFold(w, "GRANT") || eqFold(w, "REVOKE") || eqFold(w, "FLUSH") || eqFold(w, "CALL") || eqFold(w, "EXECUTE"):
		return true
	case eqFold(w, "CREATE") || eqFold(w, "ALTER") || eqFold(w, "DROP") || eqFold(w, "RENAME"):
		for _, w := range words[1:] { // (CREATE OR REPLACE USER, DROP ROLE IF EXISTS)
			if eqFold(w, "USER") || eqFold(w, "ROLE") {
				return true
			}
		}
	case eqFold(w, "SET"):
		return eqFold(words[1], "PASSWORD") || eqFold(words[1], "DEFAULT") && eqFold(words[2], "ROLE")
	}
	return false
}
