package cache

import (
	"testing"

	"tableproxy/lease"
)

func TestAnalyze(t *testing.T) {
	rates := lease.TableID{Schema: "shop", Table: "rates"}
	other := lease.TableID{Schema: "other", Table: "t"}
	for _, tc := range []struct {
		sql    string
		effect Effect
		tables []lease.TableID
	}{
		{"ALTER TABLE rates CACHE", EffectCache, []lease.TableID{rates}},
		{"alter table other.t nocache", EffectNoCache, []lease.TableID{other}},
		{"ALTER TABLE rates ADD COLUMN x INT", EffectDDL, []lease.TableID{rates}},
		{"DROP TABLE rates, other.t", EffectDDL, []lease.TableID{rates, other}},
		{"TRUNCATE rates", EffectDDL, []lease.TableID{rates}},
		{"RENAME TABLE rates TO old_rates", EffectDDL, []lease.TableID{rates, {Schema: "shop", Table: "old_rates"}}},
		{"INSERT INTO rates VALUES (1)", EffectWrite, []lease.TableID{rates}},
		{"INSERT INTO other.t SELECT * FROM rates", EffectWrite, []lease.TableID{other, rates}},
		{"UPDATE rates r JOIN other.t o ON r.id = o.id SET r.v = o.v", EffectWrite, []lease.TableID{rates, other}},
		{"DELETE FROM rates WHERE id = 3", EffectWrite, []lease.TableID{rates}},
		{"REPLACE INTO rates VALUES (2)", EffectWrite, []lease.TableID{rates}},
		{"SELECT * FROM rates WHERE id = 1", EffectNone, nil},
		{"SELECT CONCAT(a, UPPER(b)), COUNT(*) FROM rates GROUP BY a", EffectNone, nil},
		{"SELECT my_func(id) FROM rates", EffectUnknown, nil},
		{"SELECT other.fn(1)", EffectUnknown, nil},
		{"CALL refresh_rates()", EffectUnknown, nil},
		{"SELECT 1; UPDATE rates SET v = 1", EffectWrite, []lease.TableID{rates}},
		{"this is not sql", EffectUnknown, nil},
		{"SET @a = 1", EffectNone, nil},
		{"USE other; DELETE FROM t", EffectWrite, []lease.TableID{other}},
		{"BEGIN", EffectNone, nil},
		{"SELECT 1 /*M!, my_func() */", EffectUnknown, nil},
		{"UPDATE other.t /*M!100000 , rates */ SET v = 1", EffectUnknown, nil},
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
	rates := lease.TableID{Schema: "shop", Table: "rates"}
	v := lease.TableID{Schema: "shop", Table: "v"}
	copyT := lease.TableID{Schema: "shop", Table: "copy"}
	for _, tc := range []struct {
		sql              string
		effect           Effect
		targets          []lease.TableID
		created, dropped []lease.TableID
		unknown          bool
		schema           string
	}{
		{sql: "ALTER TABLE rates ADD COLUMN x INT", effect: EffectDDL, targets: []lease.TableID{rates}},
		{sql: "CREATE OR REPLACE VIEW v AS SELECT id FROM rates", effect: EffectDDL, targets: []lease.TableID{v}},
		{sql: "CREATE TABLE copy AS SELECT * FROM rates", effect: EffectDDL, targets: []lease.TableID{copyT}},
		{sql: "CREATE TABLE copy LIKE rates", effect: EffectDDL, targets: []lease.TableID{copyT}},
		{sql: "CREATE TEMPORARY TABLE rates (id INT)", effect: EffectNone, created: []lease.TableID{rates}},
		{sql: "DROP TEMPORARY TABLE rates", effect: EffectNone, dropped: []lease.TableID{rates}},
		{sql: "DROP TABLE rates", effect: EffectDDL, targets: []lease.TableID{rates}, dropped: []lease.TableID{rates}},
		{sql: "DROP VIEW v", effect: EffectDDL, targets: []lease.TableID{v}},
		{sql: "RENAME TABLE copy TO rates", effect: EffectDDL, targets: []lease.TableID{copyT, rates}, unknown: true},
		{sql: "ALTER TABLE copy RENAME TO rates", effect: EffectDDL, targets: []lease.TableID{copyT, rates}, unknown: true},
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
		same := func(got, want []lease.TableID) bool {
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

// TestSessionTemps follows a session's temporary tables through the
// statements that name them and those that may make them unseen.
func TestSessionTemps(t *testing.T) {
	rates := lease.TableID{Schema: "shop", Table: "rates"}
	upper := lease.TableID{Schema: "SHOP", Table: "Rates"}
	var temps sessionTemps
	step := func(sql string, ok bool) {
		a, err := Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		temps.expect(a)
		temps.answered(ok)
	}
	step("CREATE TEMPORARY TABLE rates (id INT)", false)
	if temps.has(rates) || !temps.unknown {
		t.Fatal("a failed CREATE TEMPORARY TABLE must leave the names to be looked up, not known")
	}
	temps.reset()
	step("CREATE TEMPORARY TABLE rates (id INT)", true)
	if !temps.has(rates) || !temps.has(upper) {
		t.Fatal("the temporary table is not known (names compare without case)")
	}
	step("DROP TABLE rates", true)
	if temps.has(rates) {
		t.Fatal("DROP TABLE dropped the temporary table, which is still known")
	}
	temps.checked = map[string]bool{tempKey(rates): true}
	step("CALL make_temps()", true)
	if !temps.unknown || len(temps.checked) != 0 {
		t.Fatal("after CALL every cached table must be looked up again")
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
