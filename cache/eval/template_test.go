package eval

import "testing"

func TestTemplateOf(t *testing.T) {
	for _, tc := range []struct {
		sql, tmpl string
		lits      int
		ok        bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=42", "SELECT c FROM sbtest1 WHERE id=?", 1, true},
		{"SELECT  c\nFROM t WHERE id IN (1, 2,3) LIMIT 10;", "SELECT c FROM t WHERE id IN (?, ?,?) LIMIT ?", 4, true},
		{"SELECT `a b` FROM t1 WHERE x = 'abc'", "SELECT `a b` FROM t1 WHERE x = ?", 1, true},
		{"SELECT * FROM t WHERE id = -5", "SELECT * FROM t WHERE id = -?", 1, true},
		{"SELECT 1e5", "", 0, false},
		{"SELECT 0x1F", "", 0, false},
		{"SELECT 1.5", "", 0, false},
		{"SELECT x FROM t WHERE s = 'it''s'", "", 0, false},
		{"SELECT x FROM t WHERE s = 'a\\'b'", "", 0, false},
		{`SELECT "x"`, "", 0, false},
		{"SELECT _utf8mb4'x'", "", 0, false},
		{"SELECT x'41'", "", 0, false},
		{"SELECT 1 -- c", "", 0, false},
		{"SELECT /* c */ 1", "", 0, false},
		{"SELECT 'é'", "SELECT ?", 1, true},
		{"SELECT é FROM t", "", 0, false},
		{"SELECT t1.c FROM t1", "SELECT t1.c FROM t1", 0, true},
		{"SELECT ? FROM t", "", 0, false},
	} {
		tmpl, lits, ok := TemplateOf(tc.sql, nil, nil)
		if ok != tc.ok || (ok && (string(tmpl) != tc.tmpl || len(lits) != tc.lits)) {
			t.Errorf("%q: got %q %d %v, want %q %d %v", tc.sql, tmpl, len(lits), ok, tc.tmpl, tc.lits, tc.ok)
		}
	}
}

func FuzzTemplateOf(f *testing.F) {
	f.Add("SELECT c FROM t WHERE id IN (1, 2) AND s = 'x' LIMIT 3")
	f.Fuzz(func(t *testing.T, sql string) {
		tmpl, lits, ok := TemplateOf(sql, nil, nil)
		if !ok {
			return
		}
		// Markers outside quoted identifiers (`?` names a column).
		q, quoted := 0, false
		for _, c := range tmpl {
			switch {
			case c == '`':
				quoted = !quoted
			case c == '?' && !quoted:
				q++
			}
		}
		if q != len(lits) {
			t.Fatalf("%q: %d markers for %d literals", sql, q, len(lits))
		}
	})
}
