package eval

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"
)

// String comparison by collation. The proxy does not carry collation
// tables of its own: it asks the backend for the weight of each character
// (WEIGHT_STRING) and compares strings by their characters' weights, the
// way the backend does for the collations listed in weightedCollations.
// Those are the collations whose comparison is a plain concatenation of
// per-character weights, with no contractions and no multi-level keys;
// anything else is left to the backend. A character whose weight the
// proxy has not learned makes the comparison unanswerable (the statement
// goes to the backend), never a guess.

// weightedCollations are the collations compared in-proxy, by name.
// Collations with PAD SPACE compare as if the shorter string were padded
// with spaces; the NO PAD ones (and binary) do not.
var weightedCollations = map[string]bool{
	"utf8mb4_general_ci": true, "utf8mb4_bin": true, "utf8mb4_unicode_ci": true,
	"utf8mb4_general_nopad_ci": true, "utf8mb4_nopad_bin": true, "utf8mb4_unicode_nopad_ci": true,
	"utf8mb3_general_ci": true, "utf8mb3_bin": true, "utf8mb3_unicode_ci": true,
	"utf8_general_ci": true, "utf8_bin": true, "utf8_unicode_ci": true,
	"latin1_swedish_ci": true, "latin1_bin": true, "latin1_general_ci": true,
	"latin1_swedish_nopad_ci": true, "latin1_nopad_bin": true,
	"ascii_general_ci": true, "ascii_bin": true,
}

// StringTypes are the column types compared as strings (ENUM, SET and JSON
// compare and sort otherwise).
var StringTypes = map[string]bool{
	"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true,
	"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true,
}

// collation compares strings as one backend collation does.
type Collation struct {
	Name     string
	Charset  string // the column's character set ("binary" for binary strings)
	Binary   bool   // compare bytes as they are (binary strings)
	padSpace bool
	unicode  bool   // a UCA collation
	space    []byte // the weight of ' ', for PAD SPACE

	ascii   [128][]byte // weights of the ASCII characters, learned first
	mu      sync.Mutex  // serialises learning
	Learned atomic.Pointer[map[rune][]byte]
}

// collations holds the collations the proxy has learned from its backend.
type Collations struct {
	mu sync.Mutex
	by map[string]*Collation
}

func NewCollations() *Collations { return &Collations{by: map[string]*Collation{}} }

// get returns the named collation, learning its ASCII weights on first use,
// or nil if it is not compared in-proxy.
func (cs *Collations) Get(conn *client.Conn, name, charset string) (*Collation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.by[name]; ok {
		return c, nil
	}
	c := &Collation{Name: name, Charset: charset}
	switch {
	case name == "binary":
		c.Binary = true
	case !weightedCollations[name]:
		cs.by[name] = nil
		return nil, nil
	default:
		c.padSpace = !strings.Contains(name, "_nopad_")
		c.unicode = strings.Contains(name, "_unicode_")
		chars := make([]rune, 128)
		for i := range chars {
			chars[i] = rune(i)
		}
		ws, err := c.query(conn, chars)
		if err != nil {
			return nil, err
		}
		for i, w := range ws {
			c.ascii[i] = w
		}
		c.space = c.ascii[' ']
		if len(c.space) == 0 {
			return nil, fmt.Errorf("collation %s: no weight for space", name)
		}
	}
	m := map[rune][]byte{}
	c.Learned.Store(&m)
	cs.by[name] = c
	return c, nil
}

// learn asks the backend for the weights of the characters of vals it does
// not know yet.
func (c *Collation) learn(conn *client.Conn, vals [][]byte) error {
	if c.Binary {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	known := *c.Learned.Load()
	seen := map[rune]bool{}
	var missing []rune
	for _, v := range vals {
		for _, r := range string(v) {
			if r < utf8.RuneSelf || seen[r] {
				continue
			}
			seen[r] = true
			if c.unicode && contracting(r) {
				continue // never learned: comparisons with it go to the backend
			}
			if _, ok := known[r]; !ok {
				missing = append(missing, r)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	next := make(map[rune][]byte, len(known)+len(missing))
	for r, w := range known {
		next[r] = w
	}
	for len(missing) > 0 {
		n := min(len(missing), 256)
		ws, err := c.query(conn, missing[:n])
		if err != nil {
			return err
		}
		for i, w := range ws {
			next[missing[i]] = w
		}
		missing = missing[n:]
	}
	c.Learned.Store(&next)
	return nil
}

// contracting reports whether r may take part in a UCA contraction or
// reordering (combining marks; Thai and Lao vowels that precede their
// consonant), where a string's weights are not its characters' weights
// end to end.
func contracting(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me) || (r >= 0x0E00 && r <= 0x0EFF)
}

// query reads the weights of chars from the backend, one WEIGHT_STRING
// each, the character converted from UTF-8 to the collation's character
// set. A character the set cannot hold gets no weight (nil).
func (c *Collation) query(conn *client.Conn, chars []rune) ([][]byte, error) {
	var q strings.Builder
	q.WriteString("SELECT ")
	for i, r := range chars {
		if i > 0 {
			q.WriteString(", ")
		}
		x := hex.EncodeToString([]byte(string(r)))
		fmt.Fprintf(&q, "IF(CONVERT(CONVERT(X'%s' USING utf8mb4) USING %s) = CONVERT(X'%s' USING utf8mb4) COLLATE utf8mb4_bin, HEX(WEIGHT_STRING(CONVERT(CONVERT(X'%s' USING utf8mb4) USING %s) COLLATE %s)), NULL)",
			x, c.Charset, x, x, c.Charset, c.Name)
	}
	r, err := conn.Execute(q.String())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.RowNumber() != 1 {
		return nil, fmt.Errorf("collation %s: no weights", c.Name)
	}
	out := make([][]byte, len(chars))
	for i := range chars {
		s := ResultString(r, 0, i)
		if s == "" {
			continue
		}
		w, err := hex.DecodeString(s)
		if err != nil {
			return nil, err
		}
		out[i] = w
	}
	return out, nil
}

// weight returns the weight of the character at the start of s and the
// character's length, or ok=false when it is not known.
func (c *Collation) weight(s []byte, known map[rune][]byte) (w []byte, n int, ok bool) {
	if s[0] < utf8.RuneSelf {
		w = c.ascii[s[0]]
		return w, 1, w != nil
	}
	r, n := utf8.DecodeRune(s)
	if r == utf8.RuneError && n <= 1 {
		return nil, 0, false
	}
	w, ok = known[r]
	return w, n, ok && w != nil
}

// key appends the weights of s to buf: s's sort key, as the backend's
// WEIGHT_STRING would give it (without padding).
func (c *Collation) key(buf, s []byte) ([]byte, bool) {
	if c.Binary {
		return append(buf, s...), true
	}
	known := *c.Learned.Load()
	for len(s) > 0 {
		w, n, ok := c.weight(s, known)
		if !ok {
			return buf, false
		}
		buf = append(buf, w...)
		s = s[n:]
	}
	return buf, true
}

// compareKeys compares two sort keys of this collation: with PAD SPACE the
// shorter one is compared as if padded with spaces.
func (c *Collation) compareKeys(a, b []byte) int {
	n := min(len(a), len(b))
	if x := bytes.Compare(a[:n], b[:n]); x != 0 || len(a) == len(b) {
		return x
	}
	if !c.padSpace {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	sign := 1
	rest := a[n:]
	if len(b) > len(a) {
		rest, sign = b[n:], -1
	}
	for i, x := range rest {
		if s := c.space[i%len(c.space)]; x != s {
			if x > s {
				return sign
			}
			return -sign
		}
	}
	return 0
}

// like reports whether s matches the LIKE pattern pat ('%' any run of
// characters, '_' one character; the pattern must have no escapes), each
// character compared by weight (LIKE never pads). ok is false when a
// character's weight is unknown.
func (c *Collation) like(s, pat []byte) (match, ok bool) {
	known := *c.Learned.Load()
	// Greedy matching with backtracking to the last '%': the classic
	// wildcard algorithm, linear in most patterns.
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(pat) && pat[pi] == '%' {
			starP, starS = pi, si
			pi++
			continue
		}
		sn := c.charLen(s[si:])
		if sn == 0 {
			return false, false
		}
		if pi < len(pat) {
			if pat[pi] == '_' {
				si += sn
				pi++
				continue
			}
			eq, pn, ok := c.charEqual(s[si:], pat[pi:], known)
			if !ok {
				return false, false
			}
			if eq {
				si += sn
				pi += pn
				continue
			}
		}
		if starP < 0 {
			return false, true
		}
		// Let the last '%' swallow one more character.
		starS += c.charLen(s[starS:])
		si, pi = starS, starP+1
	}
	for pi < len(pat) && pat[pi] == '%' {
		pi++
	}
	return pi == len(pat), true
}

// charLen is the length of the character at the start of s (a byte for
// binary strings), 0 if it is not valid.
func (c *Collation) charLen(s []byte) int {
	if c.Binary || s[0] < utf8.RuneSelf {
		return 1
	}
	r, n := utf8.DecodeRune(s)
	if r == utf8.RuneError && n <= 1 {
		return 0
	}
	return n
}

// charEqual compares the first characters of a and b by weight.
func (c *Collation) charEqual(a, b []byte, known map[rune][]byte) (eq bool, bn int, ok bool) {
	if c.Binary {
		return a[0] == b[0], 1, true
	}
	wa, na, oka := c.weight(a, known)
	wb, nb, okb := c.weight(b, known)
	if !oka || !okb {
		return false, 0, false
	}
	// Characters outside the Basic Multilingual Plane share one weight in
	// the general and unicode collations, but LIKE tells them apart in
	// ways not seen from their weights: left to the backend.
	if na == 4 || nb == 4 {
		return false, 0, false
	}
	return bytes.Equal(wa, wb), nb, true
}
