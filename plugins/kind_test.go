package plugins

import (
	"strings"
	"testing"
)

func TestFirstKeyword(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"SELECT 1", "SELECT"},
		{"select*from t", "select"},
		{" \t\n\r\fSELECT 1", "SELECT"},
		{"SELECT_1 FROM t", "SELECT_1"},
		// Block comments.
		{"/* hint */ SELECT 1", "SELECT"},
		{"/**/update t", "update"},
		{"/* line one\nline two */\nDELETE FROM t", "DELETE"},
		{"/*/ still a comment */ INSERT", "INSERT"},
		{"/* a */ /* b */SHOW TABLES", "SHOW"},
		{"/* unterminated SELECT", ""},
		// Line comments: -- needs a following space, tab or newline.
		{"-- note\nDELETE FROM t", "DELETE"},
		{"--\tnote\nDELETE FROM t", "DELETE"},
		{"--\nDELETE FROM t", "DELETE"},
		{"-- only a comment", ""},
		{"--", ""},
		{"--x", ""},
		{"-1", ""},
		{"# note\nINSERT INTO t VALUES (1)", "INSERT"},
		{"#\nINSERT", "INSERT"},
		{"#", ""},
		{"# SELECT", ""},
		// Executable comments are code.
		{"/*!40101 SET NAMES utf8 */", "SET"},
		{"/*!SET @a = 1 */", "SET"},
		{"/*!50100SELECT 1 */", "SELECT"},
		{"/* c */ /*!40000 ALTER TABLE t DISABLE KEYS */", "ALTER"},
		// Parentheses and empty statements.
		{"(SELECT 1) UNION (SELECT 2)", "SELECT"},
		{"( ( /* c */ (select 1)))", "select"},
		{";; SELECT 1", "SELECT"},
		// Nothing, or no word.
		{"", ""},
		{"   \n\t", ""},
		{"/", ""},
		{"*", ""},
		{"\x00\xffSELECT", ""},
		{"\xef\xbb\xbfSELECT 1", ""}, // a byte-order mark is not whitespace
		{"@@version", ""},
		{"`select`", ""},
		{"'SELECT'", ""},
	} {
		if got := FirstKeyword(c.sql); got != c.want {
			t.Errorf("FirstKeyword(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want Kind
	}{
		{"SELECT 1", KindSelect},
		{"select 1", KindSelect},
		{"SeLeCt 1", KindSelect},
		{"INSERT INTO t VALUES (1)", KindInsert},
		{"update t set a = 1", KindUpdate},
		{"DELETE FROM t", KindDelete},
		{"REPLACE INTO t VALUES (1)", KindReplace},
		{"LOAD DATA LOCAL INFILE 'f' INTO TABLE t", KindLoad},
		{"load xml infile 'f' into table t", KindLoad},
		{"CREATE TABLE t (a INT)", KindDDL},
		{"ALTER TABLE t ADD INDEX i (a)", KindDDL},
		{"drop table t", KindDDL},
		{"RENAME TABLE a TO b", KindDDL},
		{"TRUNCATE t", KindDDL},
		{"BEGIN", KindBegin},
		{"START TRANSACTION READ ONLY", KindBegin},
		{"COMMIT", KindCommit},
		{"ROLLBACK TO SAVEPOINT s", KindRollback},
		{"SET autocommit = 0", KindSet},
		{"USE shop", KindUse},
		{"SHOW TABLES", KindShow},
		{"DESC t", KindShow},
		{"describe t", KindShow},
		{"EXPLAIN SELECT 1", KindShow},
		{"CALL proc()", KindCall},
		{"KILL QUERY 12", KindKill},
		{"ADMIN SHOW CACHED TABLES", KindAdmin},
		{"WITH c AS (SELECT 1) SELECT * FROM c", KindWith},
		// Comments of every style before the keyword.
		{"/* app=shop */ SELECT 1", KindSelect},
		{"-- app=shop\nUPDATE t SET a = 1", KindUpdate},
		{"# app=shop\nDELETE FROM t", KindDelete},
		{"/*!40101 SET character_set_client = utf8 */", KindSet},
		{"/*!40000 ALTER TABLE `t` DISABLE KEYS */;", KindDDL},
		{"((SELECT 1))", KindSelect},
		// Not keywords the classifier knows.
		{"", KindOther},
		{"GRANT ALL ON *.* TO u", KindOther},
		{"SELECTED", KindOther},
		{"SEL", KindOther},
		{"DESCRIBES", KindOther},
		{"TRUNCATED", KindOther},
		{"\xff\xfe\x00", KindOther},
		{"-- SELECT", KindOther},
		{"/* SELECT */", KindOther},
	} {
		if got := Classify(c.sql); got != c.want {
			t.Errorf("Classify(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]Kind{}
	for k := range numKinds {
		name := k.String()
		if name == "" {
			t.Errorf("kind %d has no name", k)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("kinds %d and %d are both named %q", prev, k, name)
		}
		seen[name] = k
	}
	if Kind(200).String() != "other" || numKinds.String() != "other" {
		t.Error("an unknown kind is not named other")
	}
	writes := map[Kind]bool{KindInsert: true, KindUpdate: true, KindDelete: true, KindReplace: true, KindLoad: true, KindDDL: true}
	for k := range numKinds {
		if k.IsWrite() != writes[k] {
			t.Errorf("%v.IsWrite() = %v", k, k.IsWrite())
		}
	}
}

// Classify and FirstKeyword read every statement a client sends, so no
// input may make them panic; FirstKeyword returns a word of the input.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "SELECT 1", "/*!40101 SET NAMES utf8 */", "/*!", "/*!1", "/*", "/**/", "--", "-- ", "--\n",
		"#", "((", ";", "-", "/", "\x00\xff", "/* a */ -- b\n# c\nDELETE", "/*!12345", "/*M!100100 DROP */",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		k := Classify(sql)
		if k >= numKinds {
			t.Fatalf("Classify(%q) = %d, out of range", sql, k)
		}
		w := FirstKeyword(sql)
		if !strings.Contains(sql, w) {
			t.Fatalf("FirstKeyword(%q) = %q, not in the input", sql, w)
		}
		for i := 0; i < len(w); i++ {
			if !isWordByte(w[i]) {
				t.Fatalf("FirstKeyword(%q) = %q, has non-word byte %q", sql, w, w[i])
			}
		}
		// The kind depends on the keyword alone, unless the request runs
		// more than one statement.
		if k != KindMulti && k != KindCompound && Classify(w) != k {
			t.Fatalf("Classify(%q) = %v but Classify(%q) = %v", sql, k, w, Classify(w))
		}
	})
}

func TestClassifyEdgeForms(t *testing.T) {
	for sql, want := range map[string]Kind{
		"/*M!100100 DROP TABLE t */":  KindDDL,
		"START TRANSACTION READ ONLY": KindBegin,
		"start slave":                 KindOther,
		"START REPLICA":               KindOther,
		"--\r\nSELECT 1":              KindSelect,
		"\vUPDATE t SET a = 1":        KindUpdate,
	} {
		if got := Classify(sql); got != want {
			t.Errorf("Classify(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestMayChangeAccounts(t *testing.T) {
	for sql, want := range map[string]bool{
		"GRANT SELECT ON db.* TO u":                                  true,
		"  revoke all on db.* from u":                                true,
		"FLUSH PRIVILEGES":                                           true,
		"ALTER USER u ACCOUNT LOCK":                                  true,
		"/* x */ CREATE USER u IDENTIFIED BY 'p'":                    true,
		"CREATE OR REPLACE ROLE r":                                   true,
		"DROP ROLE IF EXISTS r":                                      true,
		"RENAME USER a TO b":                                         true,
		"SET PASSWORD FOR u = PASSWORD('p')":                         true,
		"SET DEFAULT ROLE r FOR u":                                   true,
		"CALL p()":                                                   true,
		"EXECUTE IMMEDIATE 'GRANT ...'":                              true,
		"/*M!100000 GRANT SELECT ON *.* TO u */":                     true,
		"SELECT 1; GRANT SELECT ON *.* TO u":                         true,
		"SELECT * FROM users":                                        false,
		"SET @user_id = 42":                                          false,
		"SET ROLE r":                                                 false,
		"SET STATEMENT max_statement_time=1 FOR SELECT * FROM users": false,
		"CREATE TEMPORARY TABLE tmp_users (id INT)":                  false,
		"ALTER TABLE users ADD c INT":                                false,
		"UPDATE t SET v = 1;":                                        false,
		"INSERT INTO t VALUES (1) RETURNING id":                      false,
	} {
		st := &Statement{Session: &SessionState{}, Dialect: mariadb1011}
		st.Reset(ComQuery, sql)
		if got := st.MayChangeAccounts(); got != want {
			t.Errorf("MayChangeAccounts(%q) = %v, want %v", sql, got, want)
		}
	}
}

// MayChangeAccounts runs for every query: it must not allocate.
func TestMayChangeAccountsDoesNotAllocate(t *testing.T) {
	st := &Statement{}
	st.Reset(ComQuery, "SELECT c FROM sbtest1 WHERE id=1")
	if n := testing.AllocsPerRun(100, func() { st.MayChangeAccounts() }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
