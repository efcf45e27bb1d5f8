// Package sqllex reads SQL text as MariaDB and MySQL read it before they
// parse it: which executable comments run on a server of a given version,
// where one statement of a request ends and the next begins (compound
// statements and stored-program bodies hold ';' of their own), and what the
// statements inside a compound statement are. It knows no grammar beyond
// that: the account of what a statement does is built on it elsewhere
// (plugins), with TiDB's parser for each statement it finds.
//
// What can go wrong: a text the server reads differently from this package
// (a quote it escapes where we do not, a comment it runs where we skip) is a
// statement the proxy does not see. So every choice here follows MariaDB's
// lexer (sql/sql_lex.cc), and where the session decides (NO_BACKSLASH_ESCAPES)
// callers read the text both ways.
package sqllex

// TokKind is the kind of a token.
type TokKind uint8

const (
	Word   TokKind = iota // keyword or unquoted identifier or number
	Ident                 // `quoted identifier`
	String                // 'string' or "string"
	Var                   // @user_var, @@system_var
	Punct                 // one character, or ":="
)

// Token is a span of the text [Start, End).
type Token struct {
	Kind       TokKind
	Start, End int
}

// Text is the token's text in sql.
func (t Token) Text(sql string) string { return sql[t.Start:t.End] }

// Is reports whether t is the word w (upper-case ASCII), ignoring case.
func (t Token) Is(sql, w string) bool {
	return t.Kind == Word && EqFold(sql[t.Start:t.End], w)
}

// IsPunct reports whether t is the punctuation p.
func (t Token) IsPunct(sql string, p string) bool {
	return t.Kind == Punct && sql[t.Start:t.End] == p
}

// Tokens splits sql into tokens, skipping white space and comments. An
// executable comment's markers (/*!NNNNN, /*M!NNNNNN and its closing */) are
// skipped and its code read as code: call Resolve first to drop the
// comments the server skips. backslashEscapes is false under
// NO_BACKSLASH_ESCAPES.
func Tokens(sql string, backslashEscapes bool) []Token {
	return tokens(sql, backslashEscapes, false)
}

// TokensANSIQuotes is Tokens under sql_mode ANSI_QUOTES: a double-quoted
// text is an identifier (Ident), in which a backslash is a character.
func TokensANSIQuotes(sql string, backslashEscapes bool) []Token {
	return tokens(sql, backslashEscapes, true)
}

func tokens(sql string, backslashEscapes, ansiQuotes bool) []Token {
	var toks []Token
	inExec := false
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			i = skipLine(sql, i)
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-' && (i+2 == len(sql) || sql[i+2] <= ' '):
			i = skipLine(sql, i)
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			if m := execMarker(sql, i); m > 0 && !inExec {
				i = skipDigits(sql, i+m)
				inExec = true
				continue
			}
			i = skipComment(sql, i)
		case c == '*' && inExec && i+1 < len(sql) && sql[i+1] == '/':
			inExec = false
			i += 2
		case c == '"' && ansiQuotes:
			j := SkipQuoted(sql, i, false)
			toks = append(toks, Token{Ident, i, j})
			i = j
		case c == '\'' || c == '"':
			j := SkipQuoted(sql, i, backslashEscapes)
			toks = append(toks, Token{String, i, j})
			i = j
		case c == '`':
			j := SkipQuoted(sql, i, false)
			toks = append(toks, Token{Ident, i, j})
			i = j
		case c == '@':
			j := i + 1
			if j < len(sql) && sql[j] == '@' {
				j++
			}
			if j < len(sql) && (sql[j] == '\'' || sql[j] == '"' || sql[j] == '`') {
				j = SkipQuoted(sql, j, backslashEscapes && sql[j] != '`')
			} else {
				for j < len(sql) && (IsWordByte(sql[j]) || sql[j] == '.') {
					j++
				}
			}
			toks = append(toks, Token{Var, i, j})
			i = j
		case IsWordByte(c):
			j := i + 1
			for j < len(sql) && IsWordByte(sql[j]) {
				j++
			}
			toks = append(toks, Token{Word, i, j})
			i = j
		case c == ':' && i+1 < len(sql) && sql[i+1] == '=':
			toks = append(toks, Token{Punct, i, i + 2})
			i += 2
		default:
			toks = append(toks, Token{Punct, i, i + 1})
			i++
		}
	}
	return toks
}

// execMarker returns the length of the executable-comment marker at i
// ("/*!" is 3, "/*M!" is 4), or 0.
func execMarker(s string, i int) int {
	switch {
	case i+2 < len(s) && s[i+2] == '!':
		return 3
	case i+3 < len(s) && s[i+2] == 'M' && s[i+3] == '!':
		return 4
	}
	return 0
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// skipComment skips the /* */ comment at i: to its first "*/", or to the
// end.
func skipComment(s string, i int) int {
	for j := i + 2; j+1 < len(s); j++ {
		if s[j] == '*' && s[j+1] == '/' {
			return j + 2
		}
	}
	return len(s)
}

func skipLine(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i
}

// SkipQuoted returns the index after the quoted string or identifier that
// starts at i (a doubled quote is part of it; a backslash escapes the next
// byte when backslashEscapes), or len(s) when it is not closed.
func SkipQuoted(s string, i int, backslashEscapes bool) int {
	q := s[i]
	for j := i + 1; j < len(s); {
		switch {
		case backslashEscapes && s[j] == '\\':
			j += 2
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j += 2
				continue
			}
			return j + 1
		default:
			j++
		}
	}
	return len(s)
}

// IsWordByte reports whether c may be part of an unquoted word: ASCII
// letters, digits, '_', '$', and every byte of a multi-byte UTF-8
// character (MariaDB accepts those in identifiers).
func IsWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// EqFold compares an ASCII word with an upper-case keyword.
func EqFold(word, upper string) bool {
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

// HasBackslashInQuote reports whether a quoted string of sql holds a
// backslash, so that NO_BACKSLASH_ESCAPES may change where it ends.
func HasBackslashInQuote(sql string) bool {
	for i := 0; i < len(sql); i++ {
		if sql[i] == '\\' {
			return true
		}
	}
	return false
}
