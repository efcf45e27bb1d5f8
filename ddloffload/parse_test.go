package ddloffload

import (
	"reflect"
	"testing"

	"tableproxy/plugins"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		want    *Request // nil: passes through
		clauses []string
	}{
		{"ALTER TABLE t ADD INDEX i (a)", &Request{Schema: "db", Table: "t"}, []string{"ADD INDEX `i` (`a`)"}},
		{"alter table s.t add key (a(10) desc, b), add unique u (c) comment 'it''s'", &Request{Schema: "s", Table: "t"},
			[]string{"ADD INDEX `` (`a`(10) DESC, `b`)", "ADD UNIQUE INDEX `u` (`c`) COMMENT 'it''s'"}},
		{"ALTER TABLE t ADD UNIQUE KEY u (a) USING BTREE", &Request{Schema: "db", Table: "t"}, []string{"ADD UNIQUE INDEX `u` (`a`) USING BTREE"}},
		{"CREATE UNIQUE INDEX u ON t (a, b)", &Request{Schema: "db", Table: "t"}, []string{"ADD UNIQUE INDEX `u` (`a`, `b`)"}},
		{"CREATE INDEX i ON `we``ird` (a)", &Request{Schema: "db", Table: "we`ird"}, []string{"ADD INDEX `i` (`a`)"}},
		{"ALTER TABLE t ADD INDEX i (a), ADD COLUMN c INT", nil, nil},
		{"ALTER TABLE t ADD INDEX i (a), ALGORITHM=INPLACE", nil, nil},
		{"ALTER TABLE t ADD FULLTEXT INDEX i (a)", nil, nil},
		{"ALTER TABLE t ADD INDEX i ((a + 1))", nil, nil},
		{"ALTER TABLE t ADD INDEX i (a) INVISIBLE", nil, nil},
		{"ALTER TABLE t ADD PRIMARY KEY (a)", nil, nil},
		{"ALTER IGNORE TABLE t ADD UNIQUE u (a)", nil, nil},
		{"ALTER TABLE t DROP INDEX i", nil, nil},
		{"CREATE INDEX i ON t (a) ALGORITHM=COPY", nil, nil},
		{"CREATE FULLTEXT INDEX i ON t (a)", nil, nil},
		{"CREATE TABLE t (a INT, KEY (a))", nil, nil},
		{"ALTER TABLE t ADD INDEX i (a); DROP TABLE t", nil, nil},
		{"ALTER TABLE t CACHE", nil, nil},
	} {
		pd := plugins.Parse(tc.sql)
		got, ok := parseRequest(pd.Stmts, pd.Err, "db")
		pd.Release()
		if tc.want == nil {
			if ok {
				t.Errorf("%s: intercepted as %+v, want it passed through", tc.sql, got)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: passed through", tc.sql)
			continue
		}
		var clauses []string
		for _, ix := range got.Indexes {
			clauses = append(clauses, ix.clause())
		}
		if got.Schema != tc.want.Schema || got.Table != tc.want.Table || !reflect.DeepEqual(clauses, tc.clauses) {
			t.Errorf("%s: got %s.%s %q, want %s.%s %q", tc.sql, got.Schema, got.Table, clauses, tc.want.Schema, tc.want.Table, tc.clauses)
		}
	}
}

func TestKeyConditions(t *testing.T) {
	tb := &tableInfo{Key: []*column{{Name: "a"}, {Name: "b"}}}
	if got, want := tb.keyCompare(">", []string{"1", "'x'"}), "((`a` > 1) OR (`a` = 1 AND `b` > 'x'))"; got != want {
		t.Errorf("keyCompare: %s, want %s", got, want)
	}
	if got, want := tb.rangeCond(keyRange{[]string{"1", "2"}, []string{"3", "4"}}),
		"((`a` > 1) OR (`a` = 1 AND `b` > 2)) AND ((`a` < 3) OR (`a` = 3 AND `b` <= 4))"; got != want {
		t.Errorf("rangeCond: %s, want %s", got, want)
	}
	if got, want := tb.keyIn([][]string{{"1", "2"}, {"3", "4"}}), "((`a` = 1 AND `b` = 2) OR (`a` = 3 AND `b` = 4))"; got != want {
		t.Errorf("keyIn: %s, want %s", got, want)
	}
	one := &tableInfo{Key: []*column{{Name: "id"}}}
	if got, want := one.keyIn([][]string{{"1"}, {"2"}}), "`id` IN (1, 2)"; got != want {
		t.Errorf("keyIn: %s, want %s", got, want)
	}
}

func TestLiterals(t *testing.T) {
	for _, tc := range []struct {
		col  column
		v    any
		want string
	}{
		{column{DataType: "int", Unsigned: true}, int32(-1), "4294967295"},
		{column{DataType: "mediumint", Unsigned: true}, int32(-1), "16777215"},
		{column{DataType: "bigint", Unsigned: true}, int64(-1), "18446744073709551615"},
		{column{DataType: "tinyint"}, int8(-5), "-5"},
		{column{DataType: "varchar", Charset: "latin1", Collation: "latin1_swedish_ci"}, "a'b", "CONVERT(X'612762' USING latin1) COLLATE latin1_swedish_ci"},
		{column{DataType: "varbinary"}, []byte{0, 0xff}, "X'00ff'"},
		{column{DataType: "datetime"}, "2024-01-02 03:04:05.5", "'2024-01-02 03:04:05.5'"},
		{column{DataType: "decimal"}, "-12.50", "-12.50"},
	} {
		got, err := tc.col.binlogLiteral(tc.v)
		if err != nil || got != tc.want {
			t.Errorf("%s %v: %s, %v; want %s", tc.col.DataType, tc.v, got, err, tc.want)
		}
	}
	if _, err := (&column{DataType: "datetime"}).binlogLiteral("2024'); DROP"); err == nil {
		t.Error("a temporal value with quotes was accepted")
	}
	c := column{DataType: "char", Charset: "latin1", Collation: "latin1_bin"}
	if got, _ := c.textLiteral([]byte("é")); got != "CONVERT(CONVERT(X'c3a9' USING utf8mb4) USING latin1) COLLATE latin1_bin" {
		t.Errorf("textLiteral: %s", got)
	}
}

func TestSecondaryKeyName(t *testing.T) {
	for line, want := range map[string]string{
		"KEY `k` (`a`)":                "k",
		"UNIQUE KEY `u``x` (`a`,`b`)":  "u`x",
		"PRIMARY KEY (`id`)":           "",
		"FULLTEXT KEY `f` (`c`)":       "",
		"CONSTRAINT `c` CHECK (a > 0)": "",
	} {
		got, ok := secondaryKeyName(line)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", line, got, ok, want)
		}
	}
}

func TestRegistryIsDurable(t *testing.T) {
	dir := t.TempDir()
	g, err := openRegistry(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		rec, err := g.add(Job{Schema: "s", Table: "t", State: StateRunning})
		if err != nil {
			t.Fatal(err)
		}
		rec.rowsDone.Store(int64(10 * (i + 1)))
		if err := g.update(rec, func(j *Job) { j.State = StateDone; j.RowsDone = rec.rowsDone.Load() }); err != nil {
			t.Fatal(err)
		}
	}
	g2, err := openRegistry(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	list := g2.list()
	if len(list) != 2 || list[0].ID != 3 || list[0].RowsDone != 30 || list[1].ID != 2 {
		t.Fatalf("after reopening: %+v", list)
	}
	if rec, _ := g2.add(Job{State: StateRunning}); rec.job.ID != 4 {
		t.Errorf("next id %d, want 4", rec.job.ID)
	}
}
