package plugins

import (
	"slices"

	"github.com/go-mysql-org/go-mysql/mysql"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/sqllex"
)

var mariadb1011 = sqllex.DialectOf("10.11.19-MariaDB")

// TestAccountSeesEveryStatement: each form that once hid a write, a DDL or
// an account change from the proxy is accounted for exactly.
func TestAccountSeesEveryStatement(t *testing.T) {
	rates := TableID{Schema: "shop", Table: "rates"}
	other := TableID{Schema: "other", Table: "t"}
	x := TableID{Schema: "shop", Table: "x"}
	type want struct {
		effect   Effect
		written  []TableID
		targets  []TableID
		accounts bool
		role     bool
	}
	for _, tc := range []struct {
		sql string
		want
	}{
		{"SELECT 1; UPDATE rates SET v = 2 WHERE id = 1", want{effect: EffectWrite, written: []TableID{rates}}},
		{"USE shop; UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"SET @a = 1; UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"SHOW TABLES; UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"COMMIT; UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"SELECT ';'; UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"SET STATEMENT max_statement_time=0 FOR UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"SET STATEMENT max_statement_time=0, sql_mode='' FOR SET STATEMENT long_query_time=1 FOR DELETE FROM rates",
			want{effect: EffectWrite, written: []TableID{rates}}},
		{"BEGIN NOT ATOMIC UPDATE rates SET v = 2; END", want{effect: EffectWrite, written: []TableID{rates}}},
		{"BEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; WHILE n < 2 DO SET n = n + 1; IF n = 2 THEN " +
			"INSERT INTO other.t VALUES (n); END IF; END WHILE; END", want{effect: EffectWrite, written: []TableID{other}}},
		{"/*!99999 SELECT 1, */ UPDATE rates SET v = 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"/*!40101 UPDATE rates SET v = 2 */", want{effect: EffectWrite, written: []TableID{rates}}},
		{"/*M!100100 UPDATE rates SET v = 2 */", want{effect: EffectWrite, written: []TableID{rates}}},
		{"/*M!999999 UPDATE rates SET v = 2 */ SELECT 1", want{effect: EffectNone}},
		{"SELECT NEXTVAL(seq)", want{effect: EffectWrite, written: []TableID{{"shop", "seq"}}}},
		{"SELECT NEXT VALUE FOR other.seq", want{effect: EffectWrite, written: []TableID{{"other", "seq"}}}},
		{"SELECT SETVAL(seq, 10)", want{effect: EffectWrite, written: []TableID{{"shop", "seq"}}}},
		{"OPTIMIZE TABLE rates", want{effect: EffectDDL, targets: []TableID{rates}}},
		{"BEGIN WORK; UPDATE other.t SET a = 1; COMMIT WORK", want{effect: EffectWrite, written: []TableID{other}}},
		{"START TRANSACTION; SELECT * FROM rates; ROLLBACK WORK", want{effect: EffectNone}},
		{"SET @a = 1; ALTER TABLE rates ADD COLUMN c2 INT", want{effect: EffectDDL, targets: []TableID{rates}}},
		{"SELECT 1; REVOKE SELECT ON shop.rates FROM u", want{effect: EffectNone, accounts: true}},
		{"/*!99999 SELECT 1, */ SET ROLE NONE", want{effect: EffectNone, role: true}},
		{"INSERT INTO other.t (a) VALUES (1) RETURNING id", want{effect: EffectWrite, written: []TableID{other}}},
		{"DELETE FROM rates WHERE id = 1 RETURNING id, v", want{effect: EffectWrite, written: []TableID{rates}}},
		{"INSERT INTO other.t (a) VALUES (1) RETURNING my_func(id)", want{effect: EffectUnknown, written: []TableID{other}, accounts: true}},
		{"EXECUTE IMMEDIATE 'UPDATE rates SET v = 2'", want{effect: EffectWrite, written: []TableID{rates}}},
		{"EXECUTE IMMEDIATE 'UPDATE rates SET v = ?' USING 2", want{effect: EffectWrite, written: []TableID{rates}}},
		{"EXECUTE IMMEDIATE CONCAT('UPDATE ', 'rates SET v = 2')", want{effect: EffectUnknown, accounts: true}},
		{"CREATE TABLE x (id INT PRIMARY KEY) WITH SYSTEM VERSIONING", want{effect: EffectDDL, targets: []TableID{x}}},
		{"CREATE OR REPLACE TABLE x (id INT PRIMARY KEY)", want{effect: EffectDDL, targets: []TableID{x}}},
		{"SELECT v INTO @v FROM rates WHERE id = 1", want{effect: EffectNone}},
		{"SELECT 1 = 1111111111111111111111111111111111111111111111111111111111111111111111111111111111111", want{effect: EffectUnknown, accounts: true}},
		{"GRANT SELECT ON shop.rates TO u", want{effect: EffectNone, accounts: true}},
		{"SET DEFAULT ROLE r FOR u", want{effect: EffectNone, accounts: true}},
		{"INSERT INTO mysql.user SELECT * FROM mysql.user", want{effect: EffectWrite, written: []TableID{{"mysql", "user"}}, accounts: true}},
		{"CREATE PROCEDURE p() BEGIN UPDATE rates SET v = 1; END", want{effect: EffectDDL}},
	} {
		a, err := AnalyzeFor(tc.sql, "shop", mariadb1011)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		if a.Effect != tc.effect || !sameTables(a.Written, tc.written) || !sameTables(a.Targets, tc.targets) ||
			a.Accounts != tc.accounts || a.Role != tc.role {
			t.Errorf("%s:\n got %v written %v targets %v accounts %v role %v (why %v)\nwant %v written %v targets %v accounts %v role %v",
				tc.sql, a.Effect, a.Written, a.Targets, a.Accounts, a.Role, a.Why, tc.effect, tc.written, tc.targets, tc.accounts, tc.role)
		}
	}
}

func TestAccountNamesDroppedTables(t *testing.T) {
	rates := TableID{Schema: "shop", Table: "rates"}
	old := TableID{Schema: "shop", Table: "old"}
	for sql, want := range map[string][]TableID{
		"DROP TABLE rates":                                 {rates},
		"DROP TABLE IF EXISTS rates, old":                  {rates, old},
		"DROP TEMPORARY TABLE rates":                       nil,
		"RENAME TABLE rates TO x, old TO y":                {rates, old},
		"RENAME TABLE rates TO old, x TO rates":            {{Schema: "shop", Table: "x"}}, // (a swap: rates holds a table after it)
		"RENAME TABLE rates TO x, x TO rates":              nil,
		"ALTER TABLE rates RENAME TO x":                    {rates},
		"ALTER TABLE rates ADD COLUMN c INT":               nil,
		"SET @a = 1; DROP TABLE rates":                     {rates},
		"CREATE OR REPLACE TABLE old (id INT PRIMARY KEY)": nil,
		"RENAME TABLE /*!99999 x TO y, */ rates TO x":      {rates},
		"DROP TABLE rates /*M!100000 , old */":             {rates, old},
	} {
		a, err := AnalyzeFor(sql, "shop", mariadb1011)
		if err != nil || !sameTables(a.Dropped, want) {
			t.Errorf("%s: dropped %v (%v), want %v", sql, a.Dropped, err, want)
		}
	}
}

func sameTables(a, b []TableID) bool {
	return len(a) == len(b) && !slices.ContainsFunc(b, func(t TableID) bool { return !slices.Contains(a, t) })
}

// TestAccountFollowsPreparedText: EXECUTE does what its PREPARE's text
// does, in the session that prepared it.
func TestAccountFollowsPreparedText(t *testing.T) {
	st := &Statement{Session: &SessionState{}, DB: "shop", Dialect: mariadb1011}
	runAs := func(sql string, out Outcome) Analysis {
		st.Reset(ComQuery, sql)
		a, err := st.Analysis()
		if err != nil {
			t.Fatal(err)
		}
		st.Finish(&out)
		return a
	}
	run := func(sql string) Analysis { return runAs(sql, Outcome{Source: FromBackend}) }
	if a := run("PREPARE s FROM 'UPDATE rates SET v = ?'"); a.Effect != EffectNone {
		t.Fatalf("PREPARE: %v", a.Effect)
	}
	if a := run("EXECUTE s USING 1"); a.Effect != EffectWrite || a.Written[0].Table != "rates" {
		t.Fatalf("EXECUTE of a prepared UPDATE: %v %v", a.Effect, a.Written)
	}
	run("SET @q = 'SELECT 1'; PREPARE s FROM @q")
	if a := run("EXECUTE s"); a.Effect != EffectUnknown || a.Why != WhyDynamicSQL {
		t.Fatalf("EXECUTE of a statement prepared from a variable: %v %v", a.Effect, a.Why)
	}
	run("DEALLOCATE PREPARE s")
	if a := run("EXECUTE s"); a.Effect != EffectUnknown || a.Why != WhyUnknownPrepared {
		t.Fatalf("EXECUTE of a deallocated statement: %v %v", a.Effect, a.Why)
	}
	if a := run("PREPARE t2 FROM 'SELECT 1'"); !a.PerRequest {
		t.Fatal("PREPARE's account is kept for its text alone")
	}
	// Within one request, EXECUTE sees the request's own PREPARE.
	if a := run("PREPARE s FROM 'DELETE FROM rates'; EXECUTE s"); a.Effect != EffectWrite {
		t.Fatalf("PREPARE and EXECUTE in one request: %v", a.Effect)
	}
	// A PREPARE the proxy refused never reached the backend: s keeps its
	// old text there.
	runAs("PREPARE s FROM 'SELECT 1'", Outcome{Source: FromProxy})
	if a := run("EXECUTE s"); a.Effect != EffectWrite {
		t.Fatalf("EXECUTE after a refused PREPARE: %v, want the old text's write", a.Effect)
	}
	// A failed request may have stopped before its PREPARE: both texts.
	runAs("SELECT no_such_column FROM rates; PREPARE s FROM 'SELECT 1'", Outcome{Source: FromBackend, Err: &mysql.MyError{Code: 1054}})
	if a := run("EXECUTE s"); a.Effect != EffectWrite {
		t.Fatalf("EXECUTE after a failed request that prepared it anew: %v, want the old text's write too", a.Effect)
	}
}

func TestKindFollowsTheBackend(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		kind Kind
	}{
		{"/*!99999 SELECT 1, */ SET ROLE NONE", KindSet},
		{"/*!40101 SELECT 1 */", KindSelect},
		{"SELECT 1; UPDATE t SET v = 2", KindMulti},
		{"SELECT ';'", KindSelect},
		{"SELECT 1;", KindSelect},
		{"BEGIN NOT ATOMIC UPDATE t SET v = 1; END", KindCompound},
		{"BEGIN", KindBegin},
		{"SET STATEMENT max_statement_time=0 FOR UPDATE t SET v = 1", KindOther},
		{"lbl: LOOP LEAVE lbl; END LOOP", KindCompound},
		{"CREATE PROCEDURE p() BEGIN UPDATE t SET v = 1; END", KindDDL},
	} {
		if k := ClassifyFor(tc.sql, mariadb1011); k != tc.kind {
			t.Errorf("%s: %v, want %v", tc.sql, k, tc.kind)
		}
	}
}

// FuzzAccount: no text panics the account, and a write names its tables.
func FuzzAccount(f *testing.F) {
	for _, s := range []string{"SELECT 1; UPDATE t SET v=2", "BEGIN NOT ATOMIC IF a THEN DELETE FROM t; END IF; END",
		"/*!99999 x */ SET STATEMENT a=1 FOR INSERT INTO t VALUES (1) RETURNING id", "EXECUTE IMMEDIATE 'DROP TABLE t'",
		"PREPARE s FROM 'UPDATE t SET a=1'; EXECUTE s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		st := &Statement{Session: &SessionState{}, DB: "db", Dialect: mariadb1011}
		st.Reset(ComQuery, sql)
		a, err := st.Analysis()
		if err == nil && a.Effect == EffectWrite && len(a.Written) == 0 {
			t.Fatalf("write without tables: %q", sql)
		}
		if strings.Count(sql, ";") == 0 && st.Kind == KindMulti {
			t.Fatalf("one statement counted as several: %q", sql)
		}
	})
}

// TestAccountWorkIsBounded: texts nested in texts cost at most
// maxAccountWork readings, whatever the nesting.
func TestAccountWorkIsBounded(t *testing.T) {
	q := "UPDATE rates SET v = 1"
	for i := 0; i < 12; i++ {
		q = "EXECUTE IMMEDIATE '" + strings.ReplaceAll(q, "'", "''") + "\\\\'; SELECT 1"
	}
	start := time.Now()
	a, _ := AnalyzeFor(q, "shop", sqllex.Dialect{})
	if time.Since(start) > 2*time.Second {
		t.Fatalf("nested EXECUTE IMMEDIATE took %v", time.Since(start))
	}
	if a.Effect != EffectUnknown && a.Effect != EffectWrite {
		t.Fatalf("effect %v", a.Effect)
	}
}

func TestAccountSaysWhy(t *testing.T) {
	for sql, why := range map[string]Conservative{
		"SELECT f_other(1)":                   WhyUserFunction,
		"CALL p()":                            WhyCall,
		"EXECUTE IMMEDIATE CONCAT('a', 'b')":  WhyDynamicSQL,
		"EXECUTE never_prepared":              WhyUnknownPrepared,
		"BEGIN NOT ATOMIC UPDATE t SET a = 1": WhyBlock,
		"this is not sql":                     WhyUnparsed,
		"HANDLER t OPEN":                      WhyOther,
	} {
		if a, _ := AnalyzeFor(sql, "shop", mariadb1011); a.Effect != EffectUnknown || a.Why != why {
			t.Errorf("%s: %v, why %v, want unknown because %v", sql, a.Effect, a.Why, why)
		}
	}
}
