package eval

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"gopkg.in/yaml.v3"

	"tableproxy/internal/mysqlwire"
	"tableproxy/internal/testdb"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// The evaluator's cases as data: each file of testdata/cases holds tables
// (columns and rows) and statements, each with the rows MariaDB answers
// or the reason the evaluator leaves it to the backend. They run on
// snapshots built in memory, with the collation weights of
// testdata/weights.json, so no backend is needed; with one,
// TestEvalCasesAgainstBackend checks every expectation against it.

// evalFile is one file of cases.
type evalFile struct {
	Tables []evalTable `yaml:"tables"`
	Cases  []evalCase  `yaml:"cases"`
}

type evalTable struct {
	Name string `yaml:"name"`
	// Columns are "name type [unsigned] [collation] [null] [pk]".
	Columns []string `yaml:"columns"`
	Rows    [][]any  `yaml:"rows"` // in primary-key order; null is NULL
	// Uncached: the table is in the backend only (no snapshot).
	Uncached bool `yaml:"uncached"`
}

type evalCase struct {
	SQL string `yaml:"sql"`
	// Rows are the answer, in order; Pass, instead, is the label of the
	// reason the evaluator declines the statement.
	Rows [][]any `yaml:"rows"`
	Pass string  `yaml:"pass"`
	// Error is the error number the backend answers a passed statement
	// with (0: it answers rows).
	Error int `yaml:"error"`
}

// evalColumn is a parsed column spec.
type evalColumn struct {
	name, typ, collation string
	unsigned, null, pk   bool
}

const evalSchema = "evaltest"

func parseEvalColumn(spec string) (evalColumn, error) {
	f := strings.Fields(spec)
	if len(f) < 2 {
		return evalColumn{}, fmt.Errorf("column %q: want a name and a type", spec)
	}
	c := evalColumn{name: f[0], typ: strings.ToLower(f[1])}
	for _, w := range f[2:] {
		switch w = strings.ToLower(w); w {
		case "unsigned":
			c.unsigned = true
		case "null":
			c.null = true
		case "pk":
			c.pk = true
		default:
			c.collation = w
		}
	}
	return c, nil
}

// ddl is the column's definition in CREATE TABLE.
func (c evalColumn) ddl() string {
	s := "`" + c.name + "` " + c.typ
	if c.unsigned {
		s += " UNSIGNED"
	}
	if c.collation != "" && c.collation != "binary" {
		s += " COLLATE " + c.collation
	}
	if !c.null {
		s += " NOT NULL"
	}
	return s
}

// field is the column definition the backend sends for it.
func (c evalColumn) field(table string) (*mysql.Field, error) {
	f := &mysql.Field{Schema: []byte(evalSchema), Table: []byte(table), OrgTable: []byte(table),
		Name: []byte(c.name), OrgName: []byte(c.name), Charset: 63} // binary
	base, _, _ := strings.Cut(c.typ, "(")
	switch base {
	case "tinyint":
		f.Type = mysql.MYSQL_TYPE_TINY
	case "smallint":
		f.Type = mysql.MYSQL_TYPE_SHORT
	case "int":
		f.Type = mysql.MYSQL_TYPE_LONG
	case "bigint":
		f.Type = mysql.MYSQL_TYPE_LONGLONG
	case "varchar", "varbinary":
		f.Type = mysql.MYSQL_TYPE_VAR_STRING
	case "char", "binary":
		f.Type = mysql.MYSQL_TYPE_STRING
	case "date":
		f.Type = mysql.MYSQL_TYPE_DATE
	default:
		return nil, fmt.Errorf("column %s: type %s is not covered by these tests", c.name, c.typ)
	}
	if isInteger(f) {
		f.Flag |= mysql.NUM_FLAG
	}
	if c.unsigned {
		f.Flag |= mysql.UNSIGNED_FLAG
	}
	if !c.null {
		f.Flag |= mysql.NOT_NULL_FLAG
	}
	if c.pk {
		f.Flag |= mysql.PRI_KEY_FLAG
	}
	if c.collation != "" && c.collation != "binary" {
		f.Charset = 45 // (only binary or not matters to the evaluator)
	} else if base == "varbinary" || base == "binary" {
		f.Flag |= mysql.BINARY_FLAG
	}
	return f, nil
}

// evalWeights are the collations' weights of testdata/weights.json: by
// collation, each character's WEIGHT_STRING in hex.
type evalWeights map[string]map[string]string

// weightChars are the characters whose weights the fixture holds: ASCII
// and a few accented letters.
func weightChars() []rune {
	var out []rune
	for r := rune(0); r < 128; r++ {
		out = append(out, r)
	}
	return append(out, []rune("éÉèüÜßñÑåÅ")...)
}

func loadWeights(t testing.TB) evalWeights {
	b, err := os.ReadFile(filepath.Join("testdata", "weights.json"))
	if err != nil {
		t.Fatal(err)
	}
	var w evalWeights
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// collationOf builds a collation from the fixture's weights.
func (w evalWeights) collationOf(name string) (*Collation, error) {
	c := &Collation{Name: name, Charset: strings.SplitN(name, "_", 2)[0]}
	learned := map[rune][]byte{}
	if name == "binary" {
		c.Binary = true
		c.Learned.Store(&learned)
		return c, nil
	}
	ws, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("no weights for collation %s in testdata/weights.json", name)
	}
	c.padSpace = !strings.Contains(name, "_nopad_")
	c.unicode = strings.Contains(name, "_unicode_")
	for ch, h := range ws {
		r := []rune(ch)[0]
		var wt []byte
		if h != "" {
			var err error
			if wt, err = hex.DecodeString(h); err != nil {
				return nil, fmt.Errorf("collation %s, %q: %v", name, ch, err)
			}
		}
		if r < 128 {
			c.ascii[r] = wt
		} else if wt != nil {
			learned[r] = wt
		}
	}
	c.space = c.ascii[' ']
	c.Learned.Store(&learned)
	return c, nil
}

// snapshot builds the table's snapshot as a load from the backend would.
func (tb evalTable) snapshot(w evalWeights) (*Snapshot, error) {
	s := &Snapshot{ID: lease.TableID{Schema: evalSchema, Table: tb.Name}}
	var cols []evalColumn
	for i, spec := range tb.Columns {
		c, err := parseEvalColumn(spec)
		if err != nil {
			return nil, err
		}
		f, err := c.field(tb.Name)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
		s.Fields = append(s.Fields, f)
		if c.pk {
			s.PK = append(s.PK, i)
		}
	}
	for _, row := range tb.Rows {
		if len(row) != len(cols) {
			return nil, fmt.Errorf("table %s: row %v has %d values for %d columns", tb.Name, row, len(row), len(cols))
		}
		var b []byte
		for _, v := range row {
			if v == nil {
				b = append(b, 0xfb)
				continue
			}
			b = mysqlwire.AppendLenEncBytes(b, []byte(fmt.Sprint(v)))
		}
		s.Rows = append(s.Rows, b)
	}
	s.IndexPK()
	if len(s.PK) == 1 && s.pkNums != nil {
		for i := 1; i < len(s.pkNums); i++ {
			if s.pkNums[i-1].Cmp(s.pkNums[i]) >= 0 {
				return nil, fmt.Errorf("table %s: rows are not in primary-key order", tb.Name)
			}
		}
	}
	s.BuildIndexes()
	s.ScanCharsets()
	s.Colls = make([]*Collation, len(cols))
	for i, c := range cols {
		if c.collation == "" {
			continue
		}
		coll, err := w.collationOf(c.collation)
		if err != nil {
			return nil, err
		}
		s.Colls[i] = coll
	}
	s.ReserveStringIndexes()
	s.Layout = LayoutOf(s)
	return s, nil
}

// evalEnv is the session the cases run in: MariaDB's defaults, utf8mb4.
var evalEnv = RunEnv{ASCIIArgs: true, UTF8Args: true, DefaultParse: true, TZFixed: true,
	DivPrecision: 4, MaxSortLength: 1024, PlainValues: true}

// evaluate answers sql as the plugin would in a utf8mb4 session with
// MariaDB's defaults, planned from its template as the text protocol
// plans it: the rows as text (nil for NULL), or why not.
func evaluate(sql string, snaps map[lease.TableID]*Snapshot) ([][]*string, Why, error) {
	text := sql
	var args []Arg
	if tmpl, lits, ok := TemplateOf(sql, nil, nil); ok {
		text = string(tmpl)
		for _, l := range lits {
			if l.IsInt {
				args = append(args, Arg{V: l.N})
			} else {
				args = append(args, Arg{Str: true, S: []byte(l.S)})
			}
		}
	}
	pd := plugins.Parse(text)
	defer pd.Release()
	if pd.Err != nil || len(pd.Stmts) != 1 {
		return nil, Why{}, fmt.Errorf("%q does not parse as one statement: %v", text, pd.Err)
	}
	sel, ok := pd.Stmts[0].(*ast.SelectStmt)
	if !ok {
		return nil, Because(NotPlainSelect, "not a SELECT"), nil
	}
	lookup := func(id lease.TableID) *Snapshot { return snaps[id] }
	pl, snap, why := BuildPlan(sel, evalSchema, lookup)
	if pl == nil {
		return nil, why, nil
	}
	if len(args) != pl.NParams {
		return nil, Because(ParamsMismatch, "the statement's literals do not match its plan"), nil
	}
	if !pl.ArgsMatch(args) {
		return nil, Because(ParamType, "a string is compared with an integer column, or a number with a string column"), nil
	}
	if pl.Join != nil {
		a, b := lookup(pl.Tables[0]), lookup(pl.Tables[1])
		joined, why := pl.JoinRows(a, b, args, evalEnv)
		if why.Declined() {
			return nil, why, nil
		}
		snap = JoinSnapshot(a, b, joined)
	}
	r := (&RowCtx{}).Reuse(snap, args, evalEnv)
	rows, why := pl.Run(r, nil)
	if why.Declined() {
		return nil, why, nil
	}
	var out [][][]byte
	if pl.PlainRows() {
		for _, i := range rows {
			if !r.SetRow(snap.Rows[i]) {
				return nil, Why{}, fmt.Errorf("row %d does not decode", i)
			}
			var vals [][]byte
			for _, c := range pl.Cols {
				v, null, _ := r.Field(c)
				if null {
					v = nil
				} else if v == nil {
					v = []byte{}
				}
				vals = append(vals, v)
			}
			out = append(out, vals)
		}
	} else if out, why = pl.ValueRows(snap, rows, args, evalEnv); why.Declined() {
		return nil, why, nil
	}
	return textRows(out), Why{}, nil
}

func textRows(rows [][][]byte) [][]*string {
	out := make([][]*string, len(rows))
	for i, row := range rows {
		out[i] = make([]*string, len(row))
		for j, v := range row {
			if v != nil {
				s := string(v)
				out[i][j] = &s
			}
		}
	}
	return out
}

// expected is a case's rows as text.
func expected(rows [][]any) [][]*string {
	out := make([][]*string, len(rows))
	for i, row := range rows {
		out[i] = make([]*string, len(row))
		for j, v := range row {
			if v != nil {
				s := fmt.Sprint(v)
				out[i][j] = &s
			}
		}
	}
	return out
}

func showRows(rows [][]*string) string {
	var b strings.Builder
	for _, row := range rows {
		b.WriteString("\n  [")
		for j, v := range row {
			if j > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("NULL")
			} else {
				b.WriteString(strconv.Quote(*v))
			}
		}
		b.WriteString("]")
	}
	return b.String()
}

func sameRows(a, b [][]*string) bool {
	return slices.EqualFunc(a, b, func(x, y []*string) bool {
		return slices.EqualFunc(x, y, func(p, q *string) bool {
			return p == nil && q == nil || p != nil && q != nil && *p == *q
		})
	})
}

// evalFiles reads every file of cases.
func evalFiles(t *testing.T) map[string]evalFile {
	names, err := filepath.Glob(filepath.Join("testdata", "cases", "*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no cases in testdata/cases (%v)", err)
	}
	files := map[string]evalFile{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f evalFile
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[strings.TrimSuffix(filepath.Base(name), ".yaml")] = f
	}
	return files
}

func TestEvalCases(t *testing.T) {
	w := loadWeights(t)
	labels := map[string]bool{}
	for r := NoReason + 1; r < NumReasons; r++ {
		labels[r.String()] = true
	}
	for name, f := range evalFiles(t) {
		t.Run(name, func(t *testing.T) {
			snaps := map[lease.TableID]*Snapshot{}
			for _, tb := range f.Tables {
				if tb.Uncached {
					continue
				}
				s, err := tb.snapshot(w)
				if err != nil {
					t.Fatal(err)
				}
				snaps[s.ID] = s
			}
			for _, c := range f.Cases {
				if (c.Pass == "") == (c.Rows == nil) || c.Pass != "" && !labels[c.Pass] {
					t.Errorf("%s: want either rows or the label of a reason to pass (not %q)", c.SQL, c.Pass)
					continue
				}
				rows, why, err := evaluate(c.SQL, snaps)
				switch {
				case err != nil:
					t.Errorf("%s: %v", c.SQL, err)
				case c.Pass != "":
					if why.Reason.String() != c.Pass {
						t.Errorf("%s\n got %s (%s), rows:%s\nwant pass %s", c.SQL, why.Reason, why.Text, showRows(rows), c.Pass)
					}
				case why.Declined():
					t.Errorf("%s\n passed: %s (%s)\nwant rows:%s", c.SQL, why.Reason, why.Text, showRows(expected(c.Rows)))
				case !sameRows(rows, expected(c.Rows)):
					t.Errorf("%s\n got rows:%s\nwant rows:%s", c.SQL, showRows(rows), showRows(expected(c.Rows)))
				}
			}
		})
	}
}

// TestEvalCasesAgainstBackend checks the cases' expectations against
// the backend: the same tables, the same statements, MariaDB's answers
// (a statement the evaluator declines must run there too), and the
// fixture's weights against the backend's WEIGHT_STRING.
// TABLEPROXY_UPDATE_WEIGHTS=1 rewrites the fixture from the backend.
func TestEvalCasesAgainstBackend(t *testing.T) {
	b := testdb.Get(t)
	db := b.Root(t)
	db.SetMaxOpenConns(1)
	schema := "`" + b.NewDatabase(t) + "`."
	mustExec(t, db, "SET NAMES utf8mb4")
	checkWeights(t, db)
	for name, f := range evalFiles(t) {
		t.Run(name, func(t *testing.T) {
			for _, tb := range f.Tables {
				var defs, pk []string
				for _, spec := range tb.Columns {
					c, err := parseEvalColumn(spec)
					if err != nil {
						t.Fatal(err)
					}
					defs = append(defs, c.ddl())
					if c.pk {
						pk = append(pk, "`"+c.name+"`")
					}
				}
				defs = append(defs, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
				mustExec(t, db, "DROP TABLE IF EXISTS "+schema+tb.Name)
				mustExec(t, db, "CREATE TABLE "+schema+tb.Name+" ("+strings.Join(defs, ", ")+")")
				for _, row := range tb.Rows {
					marks := strings.TrimSuffix(strings.Repeat("?, ", len(row)), ", ")
					mustExec(t, db, "INSERT INTO "+schema+tb.Name+" VALUES ("+marks+")", row...)
				}
			}
			mustExec(t, db, "USE "+strings.TrimSuffix(schema, "."))
			for _, c := range f.Cases {
				got, err := queryText(db, c.SQL)
				if c.Error != 0 {
					if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("Error %d ", c.Error)) {
						t.Errorf("%s: the backend: %v, want error %d", c.SQL, err, c.Error)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: the backend: %v", c.SQL, err)
					continue
				}
				if c.Pass == "" && !sameRows(got, expected(c.Rows)) {
					t.Errorf("%s\nthe backend answers:%s\n  the case expects:%s", c.SQL, showRows(got), showRows(expected(c.Rows)))
				}
			}
		})
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// queryText runs q in the text protocol: its rows as text.
func queryText(db *sql.DB, q string) ([][]*string, error) {
	rs, err := db.Query(q)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	out := [][]*string{}
	for rs.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]*string, len(cols))
		for i, v := range raw {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// checkWeights compares the fixture's weights with the backend's (or
// rewrites the fixture, under TABLEPROXY_UPDATE_WEIGHTS=1).
func checkWeights(t *testing.T, db *sql.DB) {
	w := loadWeights(t)
	fresh := evalWeights{}
	for name := range w {
		if name == "binary" {
			continue
		}
		fresh[name] = map[string]string{}
		for _, r := range weightChars() {
			var h sql.NullString
			q := "SELECT HEX(WEIGHT_STRING(CONVERT(? USING " + strings.SplitN(name, "_", 2)[0] + ") COLLATE " + name + "))"
			if err := db.QueryRow(q, string(r)).Scan(&h); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			fresh[name][string(r)] = strings.ToLower(h.String)
		}
	}
	if os.Getenv("TABLEPROXY_UPDATE_WEIGHTS") == "1" {
		b, err := json.MarshalIndent(fresh, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "weights.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for name, ws := range fresh {
		for ch, h := range ws {
			if w[name][ch] != h {
				t.Errorf("collation %s, %q: the fixture's weight %q, the backend's %q", name, ch, w[name][ch], h)
			}
		}
	}
}
