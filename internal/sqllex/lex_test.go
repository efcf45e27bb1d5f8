package sqllex

import (
	"strings"
	"testing"
)

func TestReadingsFollowTheServerVersion(t *testing.T) {
	maria := DialectOf("10.11.19-MariaDB-0+deb12u1")
	if !maria.MariaDB || maria.Version != 101119 {
		t.Fatalf("DialectOf: %+v", maria)
	}
	if d := DialectOf("5.5.5-10.11.19-MariaDB"); d != maria {
		t.Fatalf("5.5.5- prefix: %+v", d)
	}
	mysql := DialectOf("8.0.36")
	for _, c := range []struct {
		sql          string
		maria, mysql string
	}{
		{"/*!99999 SELECT 1, */ UPDATE t", "UPDATE t", "UPDATE t"},
		{"/*!50700 SELECT 1, */ UPDATE t", "UPDATE t", "SELECT 1, UPDATE t"},
		{"/*!40101 SET a=1 */", "SET a=1", "SET a=1"},
		{"/*M!100100 UPDATE t */ SELECT 1", "UPDATE t SELECT 1", "SELECT 1"},
		{"/*M!999999 UPDATE t */ SELECT 1", "SELECT 1", "SELECT 1"},
		{"/*! UPDATE t */", "UPDATE t", "UPDATE t"},
		{"SELECT '/*!99999 x */' FROM t", "SELECT '/*!99999 x */' FROM t", "SELECT '/*!99999 x */' FROM t"},
		// A skipped comment ends at its first */, even inside a quote.
		{"/*!99999 '*/ UPDATE t SET v=2; -- ' */", "UPDATE t SET v=2; -- ' */", "UPDATE t SET v=2; -- ' */"},
		{"/*T![clustered_index] CLUSTERED */ SELECT 1", "SELECT 1", "SELECT 1"},
	} {
		for _, d := range []struct {
			d    Dialect
			want string
		}{{maria, c.maria}, {mysql, c.mysql}} {
			r := Readings(c.sql, d.d, true)
			if len(r) != 1 || strings.Join(strings.Fields(r[0]), " ") != d.want {
				t.Errorf("%q on %+v: %q, want %q", c.sql, d.d, r, d.want)
			}
			if len(r[0]) != len(c.sql) {
				t.Errorf("%q: length changed", c.sql)
			}
		}
	}
	if r := Readings("/*!99999 SELECT 1, */ UPDATE t", Dialect{}, true); len(r) != 2 {
		t.Errorf("unknown dialect: %q, want both readings", r)
	}
}

func split(sql string) []string {
	toks := Tokens(sql, true)
	var out []string
	for _, s := range Split(sql, toks) {
		x := sql[s.Start:s.End]
		if s.Block {
			x = "{" + x + "}"
		}
		if s.Unbalanced {
			x += "!"
		}
		out = append(out, x)
	}
	return out
}

func TestSplitKeepsBlocksWhole(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{"SELECT 1; UPDATE t SET v=2", []string{"SELECT 1", "UPDATE t SET v=2"}},
		{"SELECT ';' ; ;UPDATE t;", []string{"SELECT ';'", "UPDATE t"}},
		{"BEGIN NOT ATOMIC UPDATE t SET v=1; END", []string{"{BEGIN NOT ATOMIC UPDATE t SET v=1; END}"}},
		{"BEGIN; UPDATE t SET v=1; COMMIT", []string{"BEGIN", "UPDATE t SET v=1", "COMMIT"}},
		{"BEGIN NOT ATOMIC IF (SELECT 1) THEN UPDATE t SET v=IF(a,1,2); END IF; END; SELECT 2",
			[]string{"{BEGIN NOT ATOMIC IF (SELECT 1) THEN UPDATE t SET v=IF(a,1,2); END IF; END}", "SELECT 2"}},
		{"lbl: LOOP LEAVE lbl; END LOOP lbl; DELETE FROM t", []string{"{lbl: LOOP LEAVE lbl; END LOOP lbl}", "DELETE FROM t"}},
		{"CREATE PROCEDURE p() BEGIN DECLARE x INT; SET x = CASE WHEN 1 THEN 2 END; UPDATE t SET v=x; END; CALL p()",
			[]string{"{CREATE PROCEDURE p() BEGIN DECLARE x INT; SET x = CASE WHEN 1 THEN 2 END; UPDATE t SET v=x; END}", "CALL p()"}},
		{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1; SELECT 1",
			[]string{"{CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1}", "SELECT 1"}},
		{"DROP TABLE IF EXISTS t; CREATE TABLE t (a int)", []string{"DROP TABLE IF EXISTS t", "CREATE TABLE t (a int)"}},
		{"BEGIN NOT ATOMIC UPDATE t SET v=1; END IF; END", []string{"{BEGIN NOT ATOMIC UPDATE t SET v=1; END IF}", "END"}},
	} {
		got := split(c.sql)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q:\n got %q\nwant %q", c.sql, got, c.want)
		}
	}
}

func TestBodyFindsEveryStatement(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string
		ok   bool
	}{
		{"BEGIN NOT ATOMIC UPDATE t SET v=1; END", "UPDATE t SET v=1", true},
		{"BEGIN NOT ATOMIC DECLARE v INT DEFAULT f(1); DECLARE c CURSOR FOR SELECT a FROM t; " +
			"DECLARE CONTINUE HANDLER FOR NOT FOUND SET v = 1; OPEN c; FETCH c INTO v; CLOSE c; " +
			"IF v > 0 THEN INSERT INTO u VALUES (v); ELSEIF v < 0 THEN DELETE FROM u; ELSE BEGIN END; END IF; " +
			"WHILE v < 3 DO SET v = v + 1; END WHILE; l: REPEAT SET v = v - 1; UNTIL v = 0 END REPEAT l; " +
			"CASE v WHEN 1 THEN UPDATE u SET a = 1; ELSE UPDATE u SET a = 2; END CASE; " +
			"FOR r IN (SELECT a FROM w) DO UPDATE x SET a = r.a; END FOR; FOR i IN 1 .. g(2) DO DO 1; END FOR; END",
			"(f(1))|SELECT a FROM t|SET v = 1|(v > 0)|INSERT INTO u VALUES (v)|(v < 0)|DELETE FROM u|(v < 3)|SET v = v + 1|" +
				"SET v = v - 1|(v = 0)|(v)|(1)|UPDATE u SET a = 1|UPDATE u SET a = 2|SELECT a FROM w|UPDATE x SET a = r.a|(1)|(g(2))|DO 1", true},
		{"BEGIN NOT ATOMIC UPDATE t SET v=1 END", "", false},
		{"BEGIN NOT ATOMIC UPDATE t SET v=1; END IF", "", false}, // (how Split ends the block above)
	} {
		toks := Tokens(c.sql, true)
		pieces, ok := Body(c.sql, toks)
		var got []string
		for _, p := range pieces {
			x := c.sql[p.Start:p.End]
			if p.Expr {
				x = "(" + x + ")"
			}
			got = append(got, x)
		}
		if ok != c.ok || c.ok && strings.Join(got, "|") != c.want {
			t.Errorf("%q:\n got %v %q\nwant %v %q", c.sql, ok, strings.Join(got, "|"), c.ok, c.want)
		}
	}
}
