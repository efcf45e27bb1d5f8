package eval

import "testing"

// asciiCollation builds a collation with MariaDB's latin1_swedish_ci-like
// case folding for ASCII letters, without a backend.
func asciiCollation(pad bool) *Collation {
	c := &Collation{Name: "test_ci", Charset: "latin1", padSpace: pad}
	for i := range c.ascii {
		b := byte(i)
		if b >= 'a' && b <= 'z' {
			b -= 'a' - 'A'
		}
		c.ascii[i] = []byte{b}
	}
	c.space = c.ascii[' ']
	m := map[rune][]byte{'é': {'E'}}
	c.Learned.Store(&m)
	return c
}

func TestCompareKeysPadding(t *testing.T) {
	pad, nopad := asciiCollation(true), asciiCollation(false)
	cases := []struct {
		a, b       string
		pad, nopad int
	}{
		{"a", "A", 0, 0},
		{"a", "a  ", 0, -1},
		{"a", "a\t", 1, -1}, // padded with ' ' (0x20), which sorts after a tab
		{"a", "ab", -1, -1},
		{"é", "E", 0, 0},
		{"b", "a ", 1, 1},
	}
	for _, tc := range cases {
		for _, x := range []struct {
			c    *Collation
			want int
		}{{pad, tc.pad}, {nopad, tc.nopad}} {
			ka, ok1 := x.c.key(nil, []byte(tc.a))
			kb, ok2 := x.c.key(nil, []byte(tc.b))
			if !ok1 || !ok2 {
				t.Fatalf("%q %q: no key", tc.a, tc.b)
			}
			if got := x.c.compareKeys(ka, kb); got != x.want {
				t.Errorf("pad=%v compare(%q, %q) = %d, want %d", x.c.padSpace, tc.a, tc.b, got, x.want)
			}
			if got := x.c.compareKeys(kb, ka); got != -x.want {
				t.Errorf("pad=%v compare(%q, %q) = %d, want %d", x.c.padSpace, tc.b, tc.a, got, -x.want)
			}
		}
	}
	if _, ok := pad.key(nil, []byte("ü")); ok {
		t.Error("a character with no learned weight must make the key unknown")
	}
}

func TestLike(t *testing.T) {
	c := asciiCollation(true)
	cases := []struct {
		s, pat string
		want   bool
	}{
		{"abc", "abc", true}, {"ABC", "abc", true}, {"abc", "a%", true}, {"abc", "%c", true},
		{"abc", "a_c", true}, {"abc", "a_", false}, {"abc", "%b%", true}, {"abc", "%d%", false},
		{"a ", "a", false}, {"", "%", true}, {"", "_", false}, {"aXbXc", "a%b%c", true},
		{"aaab", "%ab", true}, {"ébc", "Eb%", true}, {"ébc", "_bc", true},
	}
	for _, tc := range cases {
		got, ok := c.like([]byte(tc.s), []byte(tc.pat))
		if !ok || got != tc.want {
			t.Errorf("%q LIKE %q = %v (ok %v), want %v", tc.s, tc.pat, got, ok, tc.want)
		}
	}
}
