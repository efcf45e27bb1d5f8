package plugins

import (
	"testing"
)

func TestAnalyze(t *testing.T) {
	rates := TableID{Schema: "shop", Table: "rates"}
	other := TableID{Schema: "other", Table: "t"}
	for _, tc := range []struct {
		sql    string
		effect Effect
		tables []TableID
	}{
		{"ALTER TABLE rates CACHE", EffectCache, []TableID{rates}},
		{"alter table other.t nocache", EffectNoCache, []TableID{other}},
		{"ALTER TABLE rates ADD COLUMN x INT", EffectDDL, []TableID{rates}},
		{"DROP TABLE rates, other.t", EffectDDL, []TableID{rates, other}},
		{"TRUNCATE rates", EffectDDL, []TableID{rates}},
		{"RENAME TABLE rates TO old_rates", EffectDDL, []TableID{rates, {Schema: "shop", Table: "old_rates"}}},
		{"INSERT INTO rates VALUES (1)", EffectWrite, []TableID{rates}},
		{"INSERT INTO other.t SELECT * FROM rates", EffectWrite, []TableID{other, rates}},
		{"UPDATE rates r JOIN other.t o ON r.id = o.id SET r.v = o.v", EffectWrite, []TableID{rates, other}},
		{"DELETE FROM rates WHERE id = 3", EffectWrite, []TableID{rates}},
		{"REPLACE INTO rates VALUES (2)", EffectWrite, []TableID{rates}},
		{"SELECT * FROM rates WHERE id = 1", EffectNone, nil},
		{"SELECT CONCAT(a, UPPER(b)), COUNT(*) FROM rates GROUP BY a", EffectNone, nil},
		{"SELECT my_func(id) FROM rates", EffectUnknown, nil},
		{"SELECT other.fn(1)", EffectUnknown, nil},
		{"CALL refresh_rates()", EffectUnknown, nil},
		{"SELECT 1; UPDATE rates SET v = 1", EffectWrite, []TableID{rates}},
		{"this is not sql", EffectUnknown, nil},
		{"SET @a = 1", EffectNone, nil},
		{"USE other; DELETE FROM t", EffectWrite, []TableID{other}},
		{"BEGIN", EffectNone, nil},
		{"SELECT 1 /*M!, my_func() */", EffectUnknown, nil},
		// The backend's version unknown: either reading may be the one.
		{"UPDATE other.t /*M!100000 , rates */ SET v = 1", EffectWrite, []TableID{other, rates}},
	} {
		a, err := Analyze(tc.sql, "shop")
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		if a.Effect != tc.effect || len(a.Tables) != len(tc.tables) {
			t.Errorf("%s: got %v %v, want %v %v", tc.sql, a.Effect, a.Tables, tc.effect, tc.tables)
			continue
		}
		for _, want := range tc.tables {
			if len(appendUnique(nil, a.Tables...)) != len(appendUnique(a.Tables, want)) {
				t.Errorf("%s: tables %v, want %v", tc.sql, a.Tables, tc.tables)
			}
		}
	}
	if _, err := Analyze("ALTER TABLE rates CACHE; SELECT 1", "shop"); err == nil {
		t.Error("CACHE mixed with another statement accepted")
	}
}

func FuzzAnalyze(f *testing.F) {
	f.Add("UPDATE rates SET v = v + 1 WHERE id IN (1, 2)")
	f.Add("ALTER TABLE x CACHE")
	f.Fuzz(func(t *testing.T, sql string) {
		a, err := Analyze(sql, "db")
		if err == nil && a.Effect == EffectWrite && len(a.Tables) == 0 {
			// A write must name what it writes, or be unknown.
			t.Fatalf("write without tables: %q", sql)
		}
	})
}

// TestAnalyzeTargets checks what a DDL statement would change (what the
// proxy refuses on a cached table) apart from what it only reads, and what
// it does to the session's temporary tables.
func TestAnalyzeTargets(t *testing.T) {
	rates := TableID{Schema: "shop", Table: "rates"}
	v := TableID{Schema: "shop", Table: "v"}
	copyT := TableID{Schema: "shop", Table: "copy"}
	for _, tc := range []struct {
		sql              string
		effect           Effect
		targets          []TableID
		created, dropped []TableID
		unknown          bool
		schema           string
	}{
		{sql: "ALTER TABLE rates ADD COLUMN x INT", effect: EffectDDL, targets: []TableID{rates}},
		{sql: "CREATE OR REPLACE VIEW v AS SELECT id FROM rates", effect: EffectDDL, targets: []TableID{v}},
		{sql: "CREATE TABLE copy AS SELECT * FROM rates", effect: EffectDDL, targets: []TableID{copyT}},
		{sql: "CREATE TABLE copy LIKE rates", effect: EffectDDL, targets: []TableID{copyT}},
		{sql: "CREATE TEMPORARY TABLE rates (id INT)", effect: EffectNone, created: []TableID{rates}},
		{sql: "DROP TEMPORARY TABLE rates", effect: EffectNone, dropped: []TableID{rates}},
		{sql: "DROP TABLE rates", effect: EffectDDL, targets: []TableID{rates}, dropped: []TableID{rates}},
		{sql: "DROP VIEW v", effect: EffectDDL, targets: []TableID{v}},
		{sql: "RENAME TABLE copy TO rates", effect: EffectDDL, targets: []TableID{copyT, rates}, unknown: true},
		{sql: "ALTER TABLE copy RENAME TO rates", effect: EffectDDL, targets: []TableID{copyT, rates}, unknown: true},
		{sql: "LOCK TABLES rates READ", effect: EffectNone},
		{sql: "UNLOCK TABLES", effect: EffectNone},
		{sql: "DROP DATABASE shop", effect: EffectDDL, schema: "shop"},
		{sql: "CALL make_temps()", effect: EffectUnknown, unknown: true},
		{sql: "EXECUTE s", effect: EffectUnknown, unknown: true},
		{sql: "SELECT my_func(id) FROM rates", effect: EffectUnknown, unknown: true},
		{sql: "SELECT id FROM rates", effect: EffectNone},
	} {
		a, err := Analyze(tc.sql, "shop")
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		same := func(got, want []TableID) bool {
			if len(got) != len(want) {
				return false
			}
			for i := range got {
				if got[i] != want[i] {
					return false
				}
			}
			return true
		}
		if a.Effect != tc.effect || !same(a.Targets, tc.targets) || !same(a.TempCreated, tc.created) ||
			!same(a.TempDropped, tc.dropped) || a.TempsUnknown != tc.unknown || a.DropSchema != tc.schema {
			t.Errorf("%s: got effect %v targets %v created %v dropped %v unknown %v schema %q", tc.sql,
				a.Effect, a.Targets, a.TempCreated, a.TempDropped, a.TempsUnknown, a.DropSchema)
		}
	}
}

// TestAnalyzeStoredFunctionsInWrites: a stored function called by a write
// or a SET may write any table, not only those the statement names.
func TestAnalyzeStoredFunctionsInWrites(t *testing.T) {
	for _, q := range []string{
		"INSERT INTO log VALUES (bump() + 100, 1)",
		"UPDATE log SET v = bump() WHERE id = 1",
		"DELETE FROM log WHERE id = other.f()",
		"SET @x = bump()",
	} {
		if a, err := Analyze(q, "shop"); err != nil || a.Effect != EffectUnknown {
			t.Errorf("%s: %v %v, want a write of unknown tables", q, a.Effect, err)
		}
	}
	for _, q := range []string{"INSERT INTO log VALUES (CONCAT('a', 'b'), NOW())", "SET @x = CONCAT('a', 1)"} {
		if a, err := Analyze(q, "shop"); err != nil || a.Effect == EffectUnknown {
			t.Errorf("%s: %v %v, builtins only", q, a.Effect, err)
		}
	}
}

// TestAnalyzeIndexOnly: only a DDL that adds secondary indexes and nothing
// else leaves every row and column as it was.
func TestAnalyzeIndexOnly(t *testing.T) {
	for sql, want := range map[string]bool{
		"ALTER TABLE rates ADD INDEX ic (c)":                                   true,
		"ALTER TABLE rates ADD KEY (c), ADD UNIQUE KEY uk (code)":              true,
		"ALTER TABLE rates ADD INDEX ic (c), ALGORITHM=INPLACE, LOCK=NONE":     true,
		"CREATE UNIQUE INDEX uk ON rates (code)":                               true,
		"create index ic on rates (c); create index id on rates (d)":           true,
		"ALTER TABLE rates ADD FULLTEXT INDEX ft (c)":                          true,
		"ALTER IGNORE TABLE rates ADD UNIQUE (code)":                           false, // deletes duplicates
		"ALTER /* x */ IGNORE TABLE rates ADD UNIQUE (code)":                   false,
		"ALTER /*!IGNORE*/ TABLE rates ADD UNIQUE (code)":                      false,
		"ALTER ONLINE TABLE rates ADD INDEX ic (c)":                            false,
		"ALTER TABLE rates ADD PRIMARY KEY (id)":                               false,
		"ALTER TABLE rates ADD INDEX ic (c), ADD COLUMN x INT":                 false,
		"ALTER TABLE rates ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES p(id)": false,
		"ALTER TABLE rates DROP INDEX ic":                                      false,
		"ALTER TABLE rates ENGINE=InnoDB":                                      false,
		"CREATE INDEX ic ON rates (c); DROP TABLE rates":                       false,
		"RENAME TABLE rates TO r2":                                             false,
		"UPDATE rates SET c = 1":                                               false,
	} {
		a, err := Analyze(sql, "shop")
		if err != nil {
			t.Errorf("%s: %v", sql, err)
			continue
		}
		if a.IndexOnly != want {
			t.Errorf("%s: IndexOnly = %v, want %v", sql, a.IndexOnly, want)
		}
	}
}
