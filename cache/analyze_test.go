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
