package plugins

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus"
)

func buildFirewall(t testing.TB, opts Options, env Env) *firewall {
	t.Helper()
	f, ok := lookup("firewall")
	if !ok {
		t.Fatal("firewall is not registered")
	}
	p, err := f(opts, env)
	if err != nil {
		t.Fatalf("build firewall: %v", err)
	}
	return p.(*firewall)
}

// rules builds the options of a firewall from rules written as maps.
func rules(rs ...map[string]any) Options {
	list := make([]any, len(rs))
	for i, r := range rs {
		list[i] = r
	}
	return Options{"rules": list}
}

// check runs sql as user through fw and returns the refusing rule's name,
// or "" when the statement passes.
func check(t *testing.T, fw *firewall, user string, cmd Command, sql string) string {
	t.Helper()
	st := &Statement{User: user}
	st.Reset(cmd, sql)
	a := fw.OnStatement(st)
	switch a.Verdict {
	case Pass:
		return ""
	case Refuse:
		if a.Err == nil {
			t.Fatalf("%q refused without an error", sql)
		}
		_, rest, ok := strings.Cut(a.Err.Message, "rule '")
		name, _, ok2 := strings.Cut(rest, "'")
		if !ok || !ok2 {
			t.Fatalf("refusal message %q names no rule", a.Err.Message)
		}
		return name
	}
	t.Fatalf("%q: verdict %v, want Pass or Refuse", sql, a.Verdict)
	return ""
}

type fwCase struct {
	user, sql, want string
}

func runCases(t *testing.T, fw *firewall, cases []fwCase) {
	t.Helper()
	for _, c := range cases {
		if got := check(t, fw, c.user, ComQuery, c.sql); got != c.want {
			t.Errorf("%s: %q blocked by %q, want %q", c.user, c.sql, got, c.want)
		}
	}
}

func TestFirewallRefusal(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-drop", "kinds": []any{"ddl"}},
		map[string]any{"name": "no-truncate", "pattern": `^\s*truncate`, "message": "ask a DBA"},
	), Env{})
	st := stmt(ComQuery, "DROP TABLE orders")
	a := fw.OnStatement(st)
	if a.Verdict != Refuse {
		t.Fatalf("verdict %v, want Refuse", a.Verdict)
	}
	want := &mysql.MyError{Code: 1045, State: "28000", Message: "Access denied: statement blocked by tableproxy firewall rule 'no-drop'"}
	if *a.Err != *want {
		t.Errorf("error %+v, want %+v", *a.Err, *want)
	}
	if a.Err.Error() != "ERROR 1045 (28000): Access denied: statement blocked by tableproxy firewall rule 'no-drop'" {
		t.Errorf("client sees %q", a.Err.Error())
	}

	// Each refusal gets its own error value: nobody downstream can change
	// what the next session is told.
	b := fw.OnStatement(st)
	if a.Err == b.Err {
		t.Error("two refusals share one *MyError")
	}

	// The optional message follows the rule's name. TRUNCATE is DDL too,
	// so the first rule wins: rules are tried in order.
	fw2 := buildFirewall(t, rules(
		map[string]any{"name": "no-truncate", "pattern": `^\s*truncate`, "message": " ask a DBA "},
		map[string]any{"name": "no-drop", "kinds": []any{"ddl"}},
	), Env{})
	a = fw2.OnStatement(stmt(ComQuery, "TRUNCATE t"))
	if a.Err == nil || a.Err.Message != "Access denied: statement blocked by tableproxy firewall rule 'no-truncate': ask a DBA" {
		t.Errorf("refusal %+v", a.Err)
	}
	if fw.OnStatement(stmt(ComQuery, "SELECT 1")).Verdict != Pass {
		t.Error("SELECT 1 was not let through")
	}
}

func TestFirewallUsers(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "reporting-read-only", "users": []any{"report", "bi"}, "kinds": []any{"insert", "update", "delete", "replace", "ddl"}},
		map[string]any{"name": "no-drop", "users": []any{"*"}, "kinds": []any{"ddl"}},
		map[string]any{"name": "app-no-load", "users": []any{"app"}, "kinds": []any{"load"}},
		map[string]any{"name": "everyone-no-kill", "kinds": []any{"kill"}},
	), Env{})
	runCases(t, fw, []fwCase{
		{"report", "UPDATE t SET a = 1", "reporting-read-only"},
		{"bi", "DELETE FROM t", "reporting-read-only"},
		{"report", "DROP TABLE t", "reporting-read-only"}, // the first matching rule names the refusal
		{"report", "SELECT * FROM t", ""},
		{"report", "LOAD DATA INFILE 'x' INTO TABLE t", ""},
		{"app", "UPDATE t SET a = 1", ""},
		{"app", "DROP TABLE t", "no-drop"},
		{"app", "LOAD DATA INFILE 'x' INTO TABLE t", "app-no-load"},
		{"app", "KILL 12", "everyone-no-kill"},
		{"someone", "DROP TABLE t", "no-drop"},
		{"someone", "LOAD DATA INFILE 'x' INTO TABLE t", ""},
		{"someone", "KILL 12", "everyone-no-kill"},
		{"", "DROP TABLE t", "no-drop"},
		{"REPORT", "UPDATE t SET a = 1", ""}, // user names are case-sensitive, as in MySQL
	})
}

func TestFirewallDigest(t *testing.T) {
	sample := stmt(ComQuery, "DELETE FROM audit WHERE at < '2020-01-01'")
	fw := buildFirewall(t, rules(
		map[string]any{"name": "by-text", "digest": "SELECT * FROM t WHERE id = 1"},
		map[string]any{"name": "by-hex", "digest": strings.ToUpper(sample.Digest())},
		map[string]any{"name": "by-normalized", "digest": "select `name` from `users` where `id` = ?"},
	), Env{})
	runCases(t, fw, []fwCase{
		{"app", "SELECT * FROM t WHERE id = 1", "by-text"},
		{"app", "select * from t where id=42", "by-text"},
		{"app", "  SELECT  *\n FROM `t`  WHERE id = 'x' /* note */", "by-text"},
		{"app", "SELECT * FROM t WHERE id = 1;", "by-text"},
		{"app", "SELECT * FROM t WHERE id = 1 AND 1 = 1", ""},
		{"app", "SELECT * FROM t2 WHERE id = 1", ""},
		{"app", "SELECT a FROM t WHERE id = 1", ""},
		{"app", "DELETE FROM audit WHERE at < '2024-06-30'", "by-hex"},
		{"app", "DELETE FROM audit WHERE at > '2024-06-30'", ""},
		{"app", "SELECT name FROM users WHERE id = 99", "by-normalized"},
	})
}

func TestFirewallPattern(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-sleep", "pattern": `\bsleep\s*\(`},
		map[string]any{"name": "secret-table", "pattern": `(?-i)\bSecrets\b`},
	), Env{})
	runCases(t, fw, []fwCase{
		{"app", "SELECT SLEEP(10)", "no-sleep"},
		{"app", "select sleep (1)", "no-sleep"},
		{"app", "SELECT sleepy FROM t", ""},
		{"app", "SELECT * FROM Secrets", "secret-table"},
		{"app", "SELECT * FROM secrets", ""}, // (?-i) makes the rule case-sensitive
	})
}

func TestFirewallKinds(t *testing.T) {
	fw := buildFirewall(t, rules(map[string]any{"name": "no-ddl-delete", "kinds": []any{"DDL", "delete"}}), Env{})
	runCases(t, fw, []fwCase{
		{"app", "DROP TABLE t", "no-ddl-delete"},
		{"app", "alter table t add column c int", "no-ddl-delete"},
		{"app", "TRUNCATE TABLE t", "no-ddl-delete"},
		{"app", "/* cleanup */ DELETE FROM t", "no-ddl-delete"},
		{"app", "(DELETE FROM t)", "no-ddl-delete"},
		{"app", "SELECT * FROM t", ""},
		{"app", "INSERT INTO t VALUES (1)", ""},
		{"app", "SELECT 'DROP TABLE t'", ""},
	})
}

// A rule matches only when all its conditions do.
func TestFirewallAllConditions(t *testing.T) {
	fw := buildFirewall(t, rules(map[string]any{
		"name": "no-unbounded-delete", "users": []any{"app"}, "kinds": []any{"delete"}, "pattern": `^[^;]*$`,
		"digest": "DELETE FROM sessions",
	}), Env{})
	runCases(t, fw, []fwCase{
		{"app", "DELETE FROM sessions", "no-unbounded-delete"},
		{"app", "delete from `sessions`", "no-unbounded-delete"},
		{"app", "DELETE FROM sessions WHERE id = 1", ""}, // digest differs
		{"app", "DELETE FROM sessions;", ""},             // pattern differs
		{"app", "SELECT * FROM sessions", ""},            // kind differs
		{"admin", "DELETE FROM sessions", ""},            // user differs
	})
}

// Prepared statements are filtered when prepared, and again when executed.
func TestFirewallPrepared(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-delete", "kinds": []any{"delete"}},
		map[string]any{"name": "no-user-lookup", "digest": "SELECT * FROM users WHERE email = 'a@b.c'"},
		map[string]any{"name": "no-sleep", "pattern": `sleep\(`},
	), Env{})
	for _, cmd := range []Command{ComStmtPrepare, ComStmtExecute} {
		for sql, want := range map[string]string{
			"DELETE FROM t WHERE id = ?":            "no-delete",
			"SELECT * FROM users WHERE email = ?":   "no-user-lookup",
			"SELECT SLEEP(?)":                       "no-sleep",
			"SELECT * FROM users WHERE name = ?":    "",
			"UPDATE t SET deleted = 1 WHERE id = ?": "",
		} {
			if got := check(t, fw, "app", cmd, sql); got != want {
				t.Errorf("%v %q blocked by %q, want %q", cmd, sql, got, want)
			}
		}
	}
}

// The text of a request can make the server run something other than its
// first keyword or its digest suggests; rules on kinds and digests see
// through it, and legitimate uses of the same syntax still pass.
func TestFirewallReadings(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-ddl", "kinds": []any{"ddl"}},
		map[string]any{"name": "no-wipe", "digest": "DELETE FROM accounts"},
	), Env{})
	runCases(t, fw, []fwCase{
		// An older server skips the versioned comment and runs what follows.
		{"app", "/*!99999 SELECT */ DROP TABLE t", "no-ddl"},
		{"app", "/*!99999 SELECT */ /*!10000 DROP TABLE t */", "no-ddl"},
		{"app", "DELETE FROM accounts /*!99999 WHERE id = 1 */", "no-wipe"},
		// MariaDB runs /*M! */ code that MySQL and the digest skip.
		{"app", "/*M!100100 DROP TABLE t */", "no-ddl"},
		{"app", "SELECT 1 /*M!100100 ; DELETE FROM accounts */", "no-wipe"},
		// ...and MySQL skips it: to MariaDB this starts with SELECT at any
		// version, but MySQL 5.7 to 9.x runs DROP TABLE t.
		{"app", "/*M!050500 SELECT */ /*!99999 SELECT */ /*!50700 DROP TABLE t */", "no-ddl"},
		// Multi-statements: the second statement counts.
		{"app", "SELECT 1; DROP TABLE t", "no-ddl"},
		{"app", "SELECT 1;DELETE FROM accounts;", "no-wipe"},
		// Under NO_BACKSLASH_ESCAPES this is three statements.
		{"app", `SELECT 'a\'; DROP TABLE t; -- '`, "no-ddl"},
		// Legitimate: executable comments that run harmless code, and
		// separators inside strings, identifiers and comments.
		{"app", "/*!40101 SET NAMES utf8mb4 */", ""},
		{"app", "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;", ""},
		{"app", "SELECT ';DROP TABLE t', \";DROP TABLE t\", `;DROP TABLE t` FROM x", ""},
		{"app", "SELECT 1 /* ; DROP TABLE t */", ""},
		{"app", "SELECT 1 -- ; DROP TABLE t", ""},
		{"app", "SELECT 1 # ; DROP TABLE t", ""},
		{"app", "SELECT 1;", ""},
		{"app", "DELETE FROM accounts WHERE id = 1; SELECT 1", ""},
	})
}

// A request with more readings than the firewall will try is refused by
// any rule on kinds or digests; a large but ordinary one is read in full.
func TestFirewallFailsClosed(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-sleep", "pattern": `sleep\(`},
		map[string]any{"name": "no-ddl", "kinds": []any{"ddl"}},
	), Env{})
	var versions strings.Builder
	for v := range maxReadingVersions + 1 {
		fmt.Fprintf(&versions, "/*!%d 1 */ ", 40000+v)
	}
	var many strings.Builder
	for i := range maxReadings + 1 {
		fmt.Fprintf(&many, "SELECT %d FROM t%d;", i, i)
	}
	var batch strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&batch, "INSERT INTO t VALUES (%d, 'row %d');\n", i, i)
	}
	runCases(t, fw, []fwCase{
		{"app", "SELECT " + versions.String(), "no-ddl"},
		{"app", many.String(), "no-ddl"},
		{"app", "SELECT 1; SELECT 2", ""},
		{"app", batch.String(), ""}, // a large batch is not too many
		{"app", batch.String() + "DROP TABLE t", "no-ddl"},
	})
}

// Digests are expensive (about 1 µs): they are computed only when a rule
// for the statement's user needs one, and only after its cheaper conditions
// have matched.
func TestFirewallDigestOnlyWhenNeeded(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "kinds", "kinds": []any{"ddl"}},
		map[string]any{"name": "pattern", "pattern": "sleep"},
		map[string]any{"name": "digest-for-bob", "users": []any{"bob"}, "digest": "SELECT 1"},
		map[string]any{"name": "digest-of-deletes", "users": []any{"carol"}, "kinds": []any{"delete"}, "digest": "DELETE FROM t"},
	), Env{})
	for _, c := range []struct {
		user, sql  string
		wantDigest bool
	}{
		{"alice", "SELECT * FROM t WHERE id = 1", false},
		{"alice", "SELECT 1", false},
		{"bob", "SELECT 2", true},
		{"carol", "SELECT 1", false},
		{"carol", "DELETE FROM t WHERE id = 1", true},
	} {
		st := &Statement{User: c.user}
		st.Reset(ComQuery, c.sql)
		fw.OnStatement(st)
		if got := st.digest != ""; got != c.wantDigest {
			t.Errorf("%s %q: digest computed = %v, want %v", c.user, c.sql, got, c.wantDigest)
		}
	}
}

func TestFirewallCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-drop", "kinds": []any{"ddl"}},
		map[string]any{"name": "no-sleep", "pattern": `sleep\(`},
		map[string]any{"name": "never", "pattern": `^nothing matches this$`},
	), Env{Metrics: reg})
	for _, sql := range []string{"DROP TABLE a", "DROP TABLE b", "SELECT SLEEP(1)", "SELECT 1"} {
		fw.OnStatement(stmt(ComQuery, sql))
	}
	want := map[string]uint64{"no-drop": 2, "no-sleep": 1, "never": 0}
	got := fw.Blocked()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Blocked() = %v, want %v", got, want)
	}
	for rule, n := range want {
		if v := metricValue(t, reg, "tableproxy_firewall_blocked_total", "rule", rule); v != float64(n) {
			t.Errorf("firewall_blocked_total{%s} = %v, want %d", rule, v, n)
		}
	}
	// A second firewall on the same registry shares the counter.
	fw2 := buildFirewall(t, rules(map[string]any{"name": "no-drop", "kinds": []any{"ddl"}}), Env{Metrics: reg})
	fw2.OnStatement(stmt(ComQuery, "DROP TABLE c"))
	if v := metricValue(t, reg, "tableproxy_firewall_blocked_total", "rule", "no-drop"); v != 3 {
		t.Errorf("after a second firewall: %v, want 3", v)
	}
}

func TestFirewallConfigErrors(t *testing.T) {
	ok := map[string]any{"name": "ok", "kinds": []any{"ddl"}}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{}, "rules: no rules"},
		{Options{"rules": []any{}}, "rules: no rules"},
		{Options{"mode": "allow", "rules": []any{ok}}, `mode: unknown mode "allow"`},
		{Options{"rule": []any{ok}}, `unknown field "rule"`},
		{rules(map[string]any{"kinds": []any{"ddl"}}), "rules[0]: name: required"},
		{rules(ok, map[string]any{"name": " ", "kinds": []any{"ddl"}}), "rules[1]: name: required"},
		{rules(ok, map[string]any{"name": "ok", "pattern": "x"}), "rules[1] (ok): name: already used by rules[0]"},
		{rules(map[string]any{"name": "empty"}), "rules[0] (empty): needs at least one of digest, pattern or kinds"},
		{rules(map[string]any{"name": "empty", "users": []any{"app"}, "kinds": []any{}}), "rules[0] (empty): needs at least one"},
		{rules(map[string]any{"name": "re", "pattern": "("}), "rules[0] (re): pattern: error parsing regexp"},
		{rules(map[string]any{"name": "k", "kinds": []any{"ddl", "dml"}}), `rules[0] (k): kinds[1]: unknown kind "dml" (known: other, select,`},
		{rules(map[string]any{"name": "u", "users": []any{"app", ""}, "kinds": []any{"ddl"}}), "rules[0] (u): users[1]: empty user name"},
		{rules(map[string]any{"name": "d", "digest": "/* nothing */"}), "rules[0] (d): digest:"},
		{rules(map[string]any{"name": "typo", "patern": "x"}), `rules[0]: options: json: unknown field "patern"`},
		{rules(map[string]any{"name": "t", "kinds": "ddl"}), "rules[0]"},
	} {
		f, _ := lookup("firewall")
		_, err := f(c.opts, Env{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %v:\n error %v\n want it to contain %q", c.opts, err, c.want)
		}
	}

	// Through Build, the error also names the plugin.
	_, err := Build([]Spec{{Name: "firewall", Options: rules(map[string]any{"name": "x", "pattern": "["})}}, Env{}, Builtins())
	if err == nil || !strings.Contains(err.Error(), "plugins[0] (firewall): rules[0] (x): pattern:") {
		t.Errorf("Build: %v", err)
	}

	// The mode may be spelled out.
	buildFirewall(t, Options{"mode": "deny", "rules": []any{ok}}, Env{})
}

func TestRequiredLiteral(t *testing.T) {
	for _, c := range []struct {
		pattern, lit string
		fold         bool
	}{
		{`(?i)\bsleep\s*\(`, "sleep", true},
		{`(?i)BENCHMARK\(`, "benchmark(", true},
		{`(?i)(?-i)Secrets`, "Secrets", false},
		{`(?i)_secret`, "_secret", true},
		{`(?i)into\s+outfile`, "outfile", true},
		{`(?i)(load_file)+`, "load_file", true},
		{`(?i)drop|truncate`, "", false}, // either may occur: nothing is required
		{`(?i)(drop)?\s*x`, "", false},
		{`(?i)a`, "", false}, // too short to be worth it
		{`(?i)пароль`, "", false},
	} {
		lit, fold := requiredLiteral(c.pattern)
		if lit != c.lit || (lit != "" && fold != c.fold) {
			t.Errorf("requiredLiteral(%q) = %q, %v; want %q, %v", c.pattern, lit, fold, c.lit, c.fold)
		}
	}
}

// The literal prefilter must never turn a match into a miss.
func TestFirewallPatternPrefilter(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "underscore", "pattern": `_secret\b`},
		map[string]any{"name": "case-sensitive", "pattern": `(?-i)MAKE_SET\(`},
		map[string]any{"name": "kelvin", "pattern": `kill\s+query`},
		map[string]any{"name": "long-s", "pattern": `sleep\(`},
	), Env{})
	runCases(t, fw, []fwCase{
		{"app", "SELECT * FROM t_SECRET", "underscore"},
		{"app", "SELECT MAKE_SET(1, 'a')", "case-sensitive"},
		{"app", "SELECT make_set(1, 'a')", ""},
		{"app", "KiLL QUERY 12", "kelvin"},
		{"app", "\u212AILL QUERY 12", "kelvin"},   // the KELVIN SIGN folds to k, as the regexp says
		{"app", "SELECT \u017Fleep(1)", "long-s"}, // so does the long s to s
		{"app", "SELECT SlEeP(1)", "long-s"},
		{"app", "SELECT sleepy(1), 'ünïcödé'", ""},
	})
}

func FuzzPatternPrefilter(f *testing.F) {
	for _, s := range []string{"SELECT SLEEP(1)", "x_secret", "\u212Aill", "\u017Fleep(", "@@Version", "sle\xffep("} {
		f.Add(s)
	}
	var res []*regexp.Regexp
	var rs []*firewallRule
	for _, p := range []string{`sleep\s*\(`, `_secret`, `@@version`, `\bkill\b`, `(?-i)DROP\s`, `[[]x]`} {
		lit, fold := requiredLiteral("(?i)" + p)
		rs = append(rs, &firewallRule{pattern: regexp.MustCompile("(?i)" + p), literal: lit, fold: fold})
		res = append(res, regexp.MustCompile("(?i)"+p))
	}
	f.Fuzz(func(t *testing.T, sql string) {
		for i, r := range rs {
			if got, want := r.patternMatches(sql), res[i].MatchString(sql); got != want {
				t.Fatalf("pattern %s on %q: prefiltered %v, regexp %v", res[i], sql, got, want)
			}
		}
	})
}

func TestIsHexDigest(t *testing.T) {
	d := stmt(ComQuery, "SELECT 1").Digest()
	for s, want := range map[string]bool{
		d: true, strings.ToUpper(d): true, d[:63]: false, d + "0": false,
		strings.Repeat("g", 64): false, "SELECT 1": false,
	} {
		if isHexDigest(s) != want {
			t.Errorf("isHexDigest(%q) = %v", s, !want)
		}
	}
}

// The scanner that finds separators and executable comments must not
// panic or slice out of range on any input.
func FuzzFirewallReadings(f *testing.F) {
	for _, s := range []string{
		"", ";", "/*!", "/*M!", "/*!12345", "/*!1 x */;y", "'", "\"\\", "`", "-- ", "--", "#;",
		"SELECT 1; DROP TABLE t", "/*!99999 SELECT */ DELETE FROM t", "/*M!100100 DROP TABLE t */",
		`SELECT 'a\'; DROP TABLE t; -- '`, "/*!50000 /*!50001 x */ */;", "/* ; */ /*!*/;",
	} {
		f.Add(s)
	}
	fw := buildFirewall(f, rules(
		map[string]any{"name": "ddl", "kinds": []any{"ddl"}},
		map[string]any{"name": "digest", "digest": "DELETE FROM t"},
	), Env{})
	f.Fuzz(func(t *testing.T, sql string) {
		rd := newReadings(sql)
		for _, v := range rd.views {
			if v.sql == "" || !strings.Contains(sql, FirstKeyword(v.sql)) {
				t.Errorf("reading %q of %q: empty, or its keyword is not in the request", v.sql, sql)
			}
		}
		st := &Statement{User: "app"}
		st.Reset(ComQuery, sql)
		a := fw.OnStatement(st)
		if a.Verdict == Refuse && (a.Err == nil || a.Err.Code != mysql.ER_ACCESS_DENIED_ERROR) {
			t.Errorf("refusal of %q without a 1045 error: %+v", sql, a.Err)
		}
		if st.Kind == KindDDL && a.Verdict != Refuse {
			t.Errorf("%q is DDL and was not refused", sql)
		}
	})
}

func benchFirewall(b *testing.B, rule map[string]any, sql string) {
	fw := buildFirewall(b, rules(rule), Env{})
	st := &Statement{User: "app"}
	b.ReportAllocs()
	for b.Loop() {
		st.Reset(ComStmtExecute, sql) // a new statement each time: nothing cached
		if a := fw.OnStatement(st); a.Verdict != Pass {
			b.Fatal(errors.New("refused"))
		}
	}
}

const benchSQL = "SELECT c FROM sbtest1 WHERE id = ?"

func BenchmarkFirewallOnStatementPattern(b *testing.B) {
	benchFirewall(b, map[string]any{"name": "no-sleep", "pattern": `\bsleep\s*\(`}, benchSQL)
}

func BenchmarkFirewallOnStatementDigest(b *testing.B) {
	benchFirewall(b, map[string]any{"name": "no-wipe", "digest": "DELETE FROM sbtest1"}, benchSQL)
}

func BenchmarkFirewallOnStatementKinds(b *testing.B) {
	benchFirewall(b, map[string]any{"name": "no-ddl", "kinds": []any{"ddl", "delete"}}, benchSQL)
}

// Rules for other users cost one map lookup.
func BenchmarkFirewallOnStatementOtherUser(b *testing.B) {
	benchFirewall(b, map[string]any{"name": "bob-no-wipe", "users": []any{"bob"}, "digest": "DELETE FROM sbtest1"}, benchSQL)
}

// TestFirewallSeesEveryStatementRun: rules on kinds and patterns apply to
// each statement a request runs, inside SET STATEMENT, compound
// statements, EXECUTE IMMEDIATE and a PREPAREd text; a text known only
// when it runs matches (the firewall fails closed).
func TestFirewallSeesEveryStatementRun(t *testing.T) {
	fw := buildFirewall(t, rules(
		map[string]any{"name": "no-ddl", "kinds": []any{"ddl"}},
		map[string]any{"name": "no-drop-db", "pattern": `drop\s+database`},
	), Env{})
	runCases(t, fw, []fwCase{
		{"app", "SET STATEMENT max_statement_time=0 FOR CREATE TABLE x (a INT)", "no-ddl"},
		{"app", "SET STATEMENT max_statement_time=0 FOR DROP DATABASE victim", "no-ddl"},
		{"app", "BEGIN NOT ATOMIC CREATE TABLE x (a INT); END", "no-ddl"},
		{"app", "EXECUTE IMMEDIATE 'CREATE TABLE x (a INT)'", "no-ddl"},
		{"app", "EXECUTE IMMEDIATE CONCAT('CREATE ', 'TABLE x (a INT)')", "no-ddl"},
		{"app", "EXECUTE IMMEDIATE 'DROP /**/ DATABASE victim'", "no-ddl"},
		{"app", "SELECT 1; DROP TABLE t", "no-ddl"},
		{"app", "SET STATEMENT max_statement_time=0 FOR SELECT 1", ""},
		{"app", "BEGIN NOT ATOMIC SELECT 1; END", ""},
		{"app", "EXECUTE IMMEDIATE 'SELECT 1'", ""},
	})
	// A PREPAREd text is checked when it is prepared.
	if got := check(t, fw, "app", ComQuery, "PREPARE s FROM 'DROP TABLE t'"); got != "no-ddl" {
		t.Errorf("PREPARE of a DDL text: blocked by %q, want no-ddl", got)
	}
	if got := check(t, fw, "app", ComQuery, "PREPARE s FROM @q"); got != "no-ddl" {
		t.Errorf("PREPARE of a text in a variable: blocked by %q, want no-ddl (fails closed)", got)
	}
}

// The firewall must see what the cache would answer: listed after it, the
// chain is refused.
func TestFirewallAfterAnsweringPluginIsRefused(t *testing.T) {
	err := checkOrder([]Spec{{Name: "cache"}, {Name: "firewall"}})
	if err == nil || !strings.Contains(err.Error(), "must be listed before") {
		t.Fatalf("firewall after cache: %v", err)
	}
	if err := checkOrder([]Spec{{Name: "metrics"}, {Name: "firewall"}, {Name: "cache"}}); err != nil {
		t.Fatal(err)
	}
}
