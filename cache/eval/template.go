package eval

// A fast path for the text protocol: instead of parsing every statement
// (a full parse costs more than answering a point select from memory),
// split it into a template, with its literals replaced by '?', and the
// literals themselves. Statements with the same template share one plan,
// built once by parsing the template as if it were a prepared statement.
//
// The scanner understands only a safe subset of MySQL's lexical rules and
// gives up (ok=false) on anything else, so the slow path, a full parse,
// handles it: comments, double-quoted text (a string or an identifier,
// depending on ANSI_QUOTES), backslashes in strings (whose meaning depends
// on NO_BACKSLASH_ESCAPES), hexadecimal, binary, decimal and exponent
// literals, character-set introducers, and non-ASCII bytes outside strings.

// literal is one literal from a statement's text.
type Literal struct {
	IsInt bool
	N     num    // when isInt
	S     string // otherwise: a quoted string's content
}

// TemplateOf returns sql with integer and simple string literals replaced
// by '?', and the literals in order.
func TemplateOf(sql string, buf []byte, lits []Literal) ([]byte, []Literal, bool) {
	buf = buf[:0]
	lits = lits[:0]
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			// Runs of white space are one space in the template.
			if len(buf) > 0 && buf[len(buf)-1] != ' ' {
				buf = append(buf, ' ')
			}
			i++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$':
			// A keyword or identifier, digits included (t1, col_2).
			j := i
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			if j < len(sql) && sql[j] == '\'' {
				return nil, nil, false // _utf8'x', x'41', N'x', b'01'
			}
			buf = append(buf, sql[i:j]...)
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			if j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') {
				// 1e5, 0x1F, 1.5, or an identifier that starts with digits.
				return nil, nil, false
			}
			n, ok := parseNum([]byte(sql[i:j]))
			if !ok {
				return nil, nil, false
			}
			lits = append(lits, Literal{IsInt: true, N: n})
			buf = append(buf, '?')
			i = j
		case c == '\'':
			j := i + 1
			for j < len(sql) && sql[j] != '\'' {
				if sql[j] == '\\' {
					return nil, nil, false
				}
				j++
			}
			if j >= len(sql) || (j+1 < len(sql) && sql[j+1] == '\'') {
				return nil, nil, false // unterminated, or a doubled quote
			}
			lits = append(lits, Literal{S: sql[i+1 : j]})
			buf = append(buf, '?')
			i = j + 1
		case c == '`':
			j := i + 1
			for j < len(sql) && sql[j] != '`' {
				j++
			}
			if j >= len(sql) || (j+1 < len(sql) && sql[j+1] == '`') {
				return nil, nil, false
			}
			buf = append(buf, sql[i:j+1]...)
			i = j + 1
		case c == '"' || c == '#' || c == '\\' || c >= 0x80:
			return nil, nil, false
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			return nil, nil, false
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			return nil, nil, false
		case c == '?':
			return nil, nil, false // a literal '?' cannot be told from ours
		default:
			buf = append(buf, c)
			i++
		}
	}
	for len(buf) > 0 && (buf[len(buf)-1] == ' ' || buf[len(buf)-1] == ';') {
		buf = buf[:len(buf)-1]
	}
	return buf, lits, true
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}
