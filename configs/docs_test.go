package configs

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/configdoc"
)

// The configuration reference, docs/configuration.md, is kept honest by
// the tests below: every field of Config must have a row there (and no row
// may name a field that does not exist), with the type and the default
// Default gives it, and every flag of `tableproxy serve` must be listed,
// next to the option it sets. The plugins' options are checked the same
// way by options_doc_test.go in cache, ddloffload and plugins.
//
// The page's option tables follow a marker comment, "<!-- options:
// configs -->" for this package's; their columns are found by their
// headers (option, type, default, flag). An option cell holds the option's
// full path in backquotes (backend.tls.ca, users[].name). A default cell
// that begins with a value in backquotes gives the default, written as in
// the file; one that begins with words describes a default that Default
// leaves empty (none, or one that is worked out at start).

const configDocPath = configdoc.Name

// docDefaultsElsewhere are options whose default is not in Default, with
// where it comes from: the page documents it as a value all the same.
var docDefaultsElsewhere = map[string]string{
	"cluster.lease":        "lease.DefaultRaftConfig, applied by the command when the option is 0",
	"cluster.lease_margin": "lease.DefaultRaftConfig, applied by the command when the option is 0",
}

// docRow is one row of an option table of the page.
type docRow struct {
	line                 int
	key, typ, def, flags string
	cells                map[string]string
}

var backquoted = regexp.MustCompile("`([^`]*)`")

// readDocTables returns the rows of every table that follows the marker
// line, keyed by their first column's backquoted name.
func readDocTables(t *testing.T, marker string) []docRow {
	t.Helper()
	var rows []docRow
	for _, r := range configdoc.Tables(t, marker) {
		rows = append(rows, docRow{line: r.Line, key: r.Key, typ: r.Type, def: r.Default, flags: r.Cells["flag"], cells: r.Cells})
	}
	return rows
}

// docDefault returns the value a default cell gives, if it begins with one.
func docDefault(cell string) (string, bool) { return configdoc.Quoted(cell) }

// configLeaf is an option of the file: a field of Config (or of a struct
// in it) that is not itself a section.
type configLeaf struct {
	path  []string // YAML names from the top; "[]" steps into a list's element
	field reflect.StructField
}

func (l configLeaf) key() string { return strings.ReplaceAll(strings.Join(l.path, "."), ".[]", "[]") }

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// configLeaves lists every option of t, recursing into sections and into
// the elements of lists of sections.
func configLeaves(t reflect.Type, prefix []string) []configLeaf {
	var out []configLeaf
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		path := append(slices.Clone(prefix), name)
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, configLeaves(f.Type, path)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, configLeaves(f.Type.Elem(), append(path, "[]"))...)
		default:
			out = append(out, configLeaf{path: path, field: f})
		}
	}
	return out
}

// docTypeName is what the page calls a field's type.
func docTypeName(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(time.Duration(0)):
		return "duration"
	case reflect.TypeOf(ByteSize(0)):
		return "size"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Uint32:
		return "integer"
	case reflect.Map:
		return "map"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "list of strings"
		}
	}
	return fmt.Sprintf("(no name for %s: add one to docTypeName)", t)
}

// valueAt is the value at path in v, the zero value of a list element's
// field when the list is empty.
func valueAt(v reflect.Value, path []string) reflect.Value {
	for i, name := range path {
		if name == "[]" {
			if v.Len() == 0 {
				return reflect.Zero(fieldTypeAt(v.Type().Elem(), path[i+1:]))
			}
			v = v.Index(0)
			continue
		}
		for j := 0; j < v.NumField(); j++ {
			if f := v.Type().Field(j); f.IsExported() && (yamlName(f) == name || strings.ToLower(f.Name) == name && yamlName(f) == "") {
				v = v.Field(j)
				break
			}
		}
	}
	return v
}

func fieldTypeAt(t reflect.Type, path []string) reflect.Type {
	for _, name := range path {
		if name == "[]" {
			t = t.Elem()
			continue
		}
		for j := 0; j < t.NumField(); j++ {
			if yamlName(t.Field(j)) == name {
				t = t.Field(j).Type
				break
			}
		}
	}
	return t
}

// yamlAt writes value at path as a YAML document.
func yamlAt(path []string, value string) string {
	var b strings.Builder
	indent := ""
	for i, name := range path {
		if name == "[]" {
			continue
		}
		item := ""
		if i+1 < len(path) && path[i+1] == "[]" {
			item = "- "
		}
		if i == len(path)-1 {
			fmt.Fprintf(&b, "%s%s: %s\n", indent, name, value)
			break
		}
		fmt.Fprintf(&b, "%s%s:\n", indent, name)
		indent += "  "
		if item != "" {
			b.WriteString(indent + item)
			// The element's first key follows the dash on the same line.
			rest := yamlAt(path[i+2:], value)
			b.WriteString(strings.ReplaceAll(strings.TrimSuffix(rest, "\n"), "\n", "\n"+indent+"  ") + "\n")
			break
		}
	}
	return b.String()
}

func TestDocsListEveryOption(t *testing.T) {
	rows := readDocTables(t, "<!-- options: configs -->")
	documented := map[string]docRow{}
	for _, r := range rows {
		if prev, dup := documented[r.key]; dup {
			t.Errorf("%s:%d: %s is documented twice (also line %d)", configDocPath, r.line, r.key, prev.line)
		}
		documented[r.key] = r
	}
	leaves := configLeaves(reflect.TypeOf(Config{}), nil)
	known := map[string]bool{}
	def := Default()
	for _, l := range leaves {
		key := l.key()
		known[key] = true
		r, ok := documented[key]
		if !ok {
			t.Errorf("%s: the option %s (Config field %s, %s) is missing", configDocPath, key, l.field.Name, l.field.Type)
			continue
		}
		if want := docTypeName(l.field.Type); r.typ != want {
			t.Errorf("%s:%d: %s: type %q, want %q", configDocPath, r.line, key, r.typ, want)
		}
		want := valueAt(reflect.ValueOf(def), l.path)
		value, given := docDefault(r.def)
		elsewhere := docDefaultsElsewhere[key] != ""
		if !given {
			if !want.IsZero() && !elsewhere {
				t.Errorf("%s:%d: %s: the default is %v, the page says %q", configDocPath, r.line, key, want.Interface(), r.def)
			}
			continue
		}
		var got Config
		doc := yamlAt(l.path, value)
		if err := Parse([]byte(doc), &got); err != nil {
			t.Errorf("%s:%d: %s: the default %q does not parse: %v\n%s", configDocPath, r.line, key, value, err, doc)
			continue
		}
		gotV := valueAt(reflect.ValueOf(got), l.path)
		if elsewhere {
			if gotV.IsZero() {
				t.Errorf("%s:%d: %s: a default from %s should not be the zero value", configDocPath, r.line, key, docDefaultsElsewhere[key])
			}
			continue
		}
		if !reflect.DeepEqual(gotV.Interface(), want.Interface()) {
			t.Errorf("%s:%d: %s: the page's default %q is %v, Default() has %v", configDocPath, r.line, key, value, gotV.Interface(), want.Interface())
		}
	}
	for _, r := range rows {
		if !known[r.key] {
			t.Errorf("%s:%d: %s is not an option of the file (no field of Config has that YAML name)", configDocPath, r.line, r.key)
		}
	}
	for key := range docDefaultsElsewhere {
		if !known[key] {
			t.Errorf("docDefaultsElsewhere names %s, which is not an option", key)
		}
	}
}

// serveFlags reads the flags of `tableproxy serve` from its source, and
// the option each one sets (by its Go field path in Config) where the
// command sets one field from it.
func serveFlags(t *testing.T) (flags []string, sets map[string]string) {
	t.Helper()
	const path = "../cmd/tableproxy/serve.go"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	calls := regexp.MustCompile(`fs\.([A-Z]\w*)\(`).FindAllStringSubmatchIndex(src, -1)
	simple := regexp.MustCompile(`^fs\.(?:String|Bool|Int|Int64|Uint|Duration|Float64)\("([a-z0-9-]+)"`)
	viaVar := regexp.MustCompile(`^fs\.(?:Var|Func|BoolFunc)\((?:[^\n]*?), "([a-z0-9-]+)", "`)
	for _, c := range calls {
		method := src[c[2]:c[3]]
		switch method {
		case "Parse", "Visit", "VisitAll", "Lookup", "Set", "Args", "Arg", "NArg", "NFlag", "PrintDefaults", "SetOutput", "Parsed", "Output", "Name", "Init":
			continue
		}
		rest := src[c[0]:]
		m := simple.FindStringSubmatch(rest)
		if m == nil {
			m = viaVar.FindStringSubmatch(rest)
		}
		if m == nil {
			end := min(len(rest), 80)
			t.Fatalf("%s: cannot read the flag defined by %q: extend serveFlags", path, rest[:end])
		}
		flags = append(flags, m[1])
	}
	if len(flags) < 10 {
		t.Fatalf("%s: read only %d flags: %v", path, len(flags), flags)
	}
	sets = map[string]string{}
	for _, m := range regexp.MustCompile(`case "([a-z0-9-]+)":\s*\n\s*cfg\.([A-Za-z.]+)\s*=`).FindAllStringSubmatch(src, -1) {
		sets[m[1]] = m[2]
	}
	if len(sets) < 5 {
		t.Fatalf("%s: read only %d flag-to-option assignments: %v", path, len(sets), sets)
	}
	return flags, sets
}

// yamlPathOf turns a Go field path of Config (Backend.Addr) into the
// option's name (backend.addr).
func yamlPathOf(t *testing.T, goPath string) string {
	t.Helper()
	typ := reflect.TypeOf(Config{})
	var names []string
	for _, part := range strings.Split(goPath, ".") {
		f, ok := typ.FieldByName(part)
		if !ok {
			t.Fatalf("Config has no field %s (from %s)", part, goPath)
		}
		names = append(names, yamlName(f))
		typ = f.Type
	}
	return strings.Join(names, ".")
}

func TestDocsListEveryServeFlag(t *testing.T) {
	flags, sets := serveFlags(t)
	table := readDocTables(t, "<!-- flags: serve -->")
	listed := map[string]docRow{}
	for _, r := range table {
		name, _, _ := strings.Cut(r.key, " ")
		name = strings.TrimPrefix(name, "--")
		listed[name] = r
	}
	for _, f := range flags {
		r, ok := listed[f]
		if !ok {
			t.Errorf("%s: the serve flag --%s is missing from the flags table", configDocPath, f)
			continue
		}
		if goPath, ok := sets[f]; ok {
			want := yamlPathOf(t, goPath)
			if got, _ := docDefault(r.cells["option"]); got != want {
				t.Errorf("%s:%d: --%s sets %s, the table says %q", configDocPath, r.line, f, want, r.cells["option"])
			}
		}
		delete(listed, f)
	}
	for name, r := range listed {
		t.Errorf("%s:%d: --%s is not a flag of tableproxy serve", configDocPath, r.line, name)
	}

	// The option tables name each option's flag.
	isFlag := map[string]bool{}
	for _, f := range flags {
		isFlag[f] = true
	}
	flagOf := map[string]string{} // option -> flag, from the command
	for f, goPath := range sets {
		flagOf[yamlPathOf(t, goPath)] = f
	}
	seen := map[string]bool{}
	for _, r := range readDocTables(t, "<!-- options: configs -->") {
		for _, m := range backquoted.FindAllStringSubmatch(r.flags, -1) {
			f := strings.TrimPrefix(m[1], "--")
			if !isFlag[f] {
				t.Errorf("%s:%d: %s: %s is not a flag of tableproxy serve", configDocPath, r.line, r.key, m[1])
				continue
			}
			if goPath, ok := sets[f]; ok && yamlPathOf(t, goPath) != r.key {
				t.Errorf("%s:%d: %s: --%s sets %s instead", configDocPath, r.line, r.key, f, yamlPathOf(t, goPath))
			}
		}
		if f, ok := flagOf[r.key]; ok {
			seen[r.key] = true
			if !strings.Contains(r.flags, "`--"+f+"`") {
				t.Errorf("%s:%d: %s: the flag column should name --%s", configDocPath, r.line, r.key, f)
			}
		}
	}
	var missing []string
	for key := range flagOf {
		if !seen[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s: options set by a flag but not documented: %v", configDocPath, missing)
	}
}

// TestDocsListDefaultPlugins: each plugin that runs by default has its
// own options table on the page.
func TestDocsListDefaultPlugins(t *testing.T) {
	for _, name := range DefaultPlugins {
		readDocTables(t, "<!-- options: plugin "+name+" -->")
	}
}

// TestDocsYAMLAt checks the helper that writes one option as a file.
func TestDocsYAMLAt(t *testing.T) {
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"listen"}, "listen: x\n"},
		{[]string{"backend", "tls", "ca"}, "backend:\n  tls:\n    ca: x\n"},
		{[]string{"users", "[]", "admin"}, "users:\n  - admin: x\n"},
	} {
		if got := yamlAt(c.path, "x"); got != c.want {
			t.Errorf("yamlAt(%v) = %q, want %q", c.path, got, c.want)
		}
	}
}
