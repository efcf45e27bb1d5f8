package sqllex

import (
	"strconv"
	"strings"
)

// Dialect is what decides which executable comments a server runs: whether
// it is MariaDB, and its version as MYSQL_VERSION_ID (10.11.19 is 101119,
// 8.0.36 is 80036). The zero Dialect is unknown.
type Dialect struct {
	MariaDB bool
	Version int
}

// Known reports whether the server's version is known.
func (d Dialect) Known() bool { return d.Version > 0 }

// DialectOf reads a server's version string as its handshake gives it
// ("10.11.19-MariaDB-0+deb12u1", "5.5.5-10.11.19-MariaDB" through a
// replication-compatible prefix, "8.0.36").
func DialectOf(serverVersion string) Dialect {
	v := serverVersion
	maria := strings.Contains(v, "MariaDB")
	if maria && strings.HasPrefix(v, "5.5.5-") {
		v = v[len("5.5.5-"):]
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 {
		return Dialect{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	patch, _ := strconv.Atoi(leadingDigits(parts[2]))
	if err1 != nil || err2 != nil || major <= 0 {
		return Dialect{}
	}
	return Dialect{MariaDB: maria, Version: major*10000 + minor*100 + patch}
}

func leadingDigits(s string) string {
	return s[:skipDigits(s, 0)]
}

// runs reports whether a server of dialect d runs an executable comment
// (maria: /*M!; version: -1 when it gives none). MariaDB runs /*!V and
// /*M!V when V is at most its own version, except that it skips /*!V for
// V in 50700-99999 (MySQL 5.7 and later syntax); MySQL runs /*!V by
// version and reads /*M! as a plain comment.
func (d Dialect) runs(maria bool, version int) bool {
	if !d.MariaDB {
		return !maria && version <= d.Version
	}
	if version < 0 {
		return true
	}
	return version <= d.Version && (maria || version < 50700 || version > 99999)
}

// HasExecComments reports whether sql may hold an executable comment (or
// TiDB's /*T! */, which TiDB's parser runs and the backend does not): a
// fast test before Readings.
func HasExecComments(sql string) bool {
	for i := 0; ; {
		j := strings.Index(sql[i:], "/*")
		if j < 0 {
			return false
		}
		i += j + 2
		if i < len(sql) && (sql[i] == '!' || (sql[i] == 'M' || sql[i] == 'T') && i+1 < len(sql) && sql[i+1] == '!') {
			return true
		}
	}
}

// Readings returns sql as a server of dialect d reads it: each executable
// comment replaced by its code, or by spaces where the server skips it;
// TiDB's /*T! */ comments blanked. The text keeps its length and offsets.
// With the dialect unknown, there are two readings: every comment run, and
// every versioned one skipped.
func Readings(sql string, d Dialect, backslashEscapes bool) []string {
	if !HasExecComments(sql) {
		return []string{sql}
	}
	if d.Known() {
		return []string{resolve(sql, backslashEscapes, d.runs)}
	}
	all := resolve(sql, backslashEscapes, func(bool, int) bool { return true })
	unversioned := resolve(sql, backslashEscapes, func(_ bool, v int) bool { return v < 0 })
	if all == unversioned {
		return []string{all}
	}
	return []string{all, unversioned}
}

// resolve blanks what a server that runs the executable comments runs
// says it skips, and the markers of those it runs. Quoted strings and
// identifiers and ordinary comments are skipped. A comment the server
// skips ends at its first "*/", wherever that is; one it runs is read as
// code and ends at the first "*/" outside a string.
func resolve(s string, backslashEscapes bool, runs func(maria bool, version int) bool) string {
	var b []byte // a copy, made at the first change
	blank := func(from, to int) {
		if b == nil {
			b = []byte(s)
		}
		for i := from; i < to; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	inCode := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = SkipQuoted(s, i, backslashEscapes && c != '`')
		case c == '#':
			i = skipLine(s, i)
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' '):
			i = skipLine(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := skipComment(s, i)
			if !inCode && i+3 < len(s) && s[i+2] == 'T' && s[i+3] == '!' {
				blank(i, end) // TiDB's: a plain comment to the backend
				i = end
				continue
			}
			m := execMarker(s, i)
			if m == 0 || inCode {
				i = end
				continue
			}
			j := i + m
			k := skipDigits(s, j)
			version := -1
			switch {
			case k-j == 5 || k-j == 6:
				version, _ = strconv.Atoi(s[j:k])
			case k-j > 6:
				// MariaDB reads six digits as the version and the rest
				// as code.
				k = j + 6
				version, _ = strconv.Atoi(s[j:k])
			default:
				k = j // not a version: the digits are code
			}
			if !runs(m == 4, version) {
				blank(i, end)
				i = end
				continue
			}
			blank(i, k)
			inCode = true
			i = k
		case c == '*' && inCode && i+1 < len(s) && s[i+1] == '/':
			blank(i, i+2)
			inCode = false
			i += 2
		default:
			i++
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}
