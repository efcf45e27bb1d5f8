package cache

import "testing"

func TestSelectListText(t *testing.T) {
	cases := []struct {
		sql, want string
		ok        bool
	}{
		{"SELECT count(k) FROM sbtest1 WHERE k BETWEEN 1 AND 2", " count(k) ", true},
		{"  select a  +  1, b FROM t", " a  +  1, b ", true},
		{"SELECT i - 3, 'from' FROM t", " i - 3, 'from' ", true},
		{"SELECT (SELECT 1 FROM d) FROM t", " (SELECT 1 FROM d) ", true},
		{"SELECT `from` FROM t", " `from` ", true},
		{"SELECT a+1\nFROM t", " a+1\n", true},
		{"SELECT 1", " 1", true},
		{"SELECT a -- x\n FROM t", "", false},
		{"SELECT a /* x */ FROM t", "", false},
		{"SELECT a # x\n FROM t", "", false},
		{"SELECT 'unterminated FROM t", "", false},
		{"SELECTa FROM t", "", false},
		{"UPDATE t SET a = 1", "", false},
	}
	for _, c := range cases {
		got, ok := selectListText(c.sql)
		if got != c.want || ok != c.ok {
			t.Errorf("selectListText(%q) = %q, %v; want %q, %v", c.sql, got, ok, c.want, c.ok)
		}
	}
}
