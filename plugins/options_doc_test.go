package plugins

import (
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestOptionsDocumented(t *testing.T) {
	t.Run("metrics", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		optDocKeys(reflect.TypeOf(metricsOptions{}), "", keys)
		checkOptionsDoc(t, "metrics", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			var o metricsOptions
			if err := DecodeOptions(raw, &o); err != nil {
				return nil, err
			}
			if o.Buckets == nil { // as newMetrics
				return defaultDurationBuckets, nil
			}
			return o.Buckets, nil
		})
	})
	t.Run("querylog", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		optDocKeys(reflect.TypeOf(queryLogOptions{}), "", keys)
		env := Env{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		checkOptionsDoc(t, "querylog", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			q, err := newQueryLogPlugin(raw, env, time.Now)
			if err != nil {
				return nil, err
			}
			defer q.Close()
			return []any{q.threshold, q.literals, q.maxLen, q.limit, q.file != nil}, nil
		})
	})
	t.Run("firewall", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		optDocKeys(reflect.TypeOf(firewallOptions{}), "", keys)
		optDocKeys(reflect.TypeOf(firewallRuleOptions{}), "rules[].", keys)
		checkOptionsDoc(t, "firewall", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			opts := Options{"rules": []any{map[string]any{"name": "r", "pattern": "x"}}} // one is required
			for k, v := range raw {
				opts[k] = v
			}
			p, err := newFirewall(opts, Env{})
			if err != nil {
				return nil, err
			}
			return p.(*firewall).mode, nil
		})
	})
	// Every plugin of this package has a table.
	for name := range Builtins() {
		optDocRows(t, name)
	}
}

// The options table of this package's plugin in docs/configuration.md
// (the one after "<!-- options: plugin NAME -->") must list every option
// the plugin takes, no other, each with a type that fits its field, and
// with the default the plugin uses: setting an option to the documented
// default must change nothing. configs/docs_test.go explains the page's
// conventions.

const optDocPath = "../docs/configuration.md"

// optDocRow is one row of a plugin's options table.
type optDocRow struct {
	line          int
	key, typ, def string
}

func optDocRows(t *testing.T, plugin string) []optDocRow {
	t.Helper()
	data, err := os.ReadFile(optDocPath)
	if err != nil {
		t.Fatalf("the configuration reference: %v", err)
	}
	marker := "<!-- options: plugin " + plugin + " -->"
	lines := strings.Split(string(data), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == marker })
	if i < 0 {
		t.Fatalf("%s: no %s table", optDocPath, marker)
	}
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) == ""; i++ {
	}
	if i+1 >= len(lines) || !strings.HasPrefix(lines[i], "|") {
		t.Fatalf("%s: %s is not followed by a table", optDocPath, marker)
	}
	header := optDocCells(lines[i])
	var rows []optDocRow
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := optDocCells(lines[i])
		if len(cells) != len(header) {
			t.Fatalf("%s:%d: %d cells, the header has %d", optDocPath, i+1, len(cells), len(header))
		}
		row := optDocRow{line: i + 1}
		for k, h := range header {
			switch h {
			case "option":
				name, ok := optDocQuoted(cells[k])
				if !ok || "`"+name+"`" != cells[k] {
					t.Fatalf("%s:%d: the option cell must be one name in backquotes, not %q", optDocPath, i+1, cells[k])
				}
				row.key = name
			case "type":
				row.typ = cells[k]
			case "default":
				row.def = cells[k]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func optDocCells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// optDocQuoted returns the first value in backquotes in cell, if the cell
// begins with one.
func optDocQuoted(cell string) (string, bool) {
	if !strings.HasPrefix(cell, "`") {
		return "", false
	}
	end := strings.Index(cell[1:], "`")
	if end < 0 {
		return "", false
	}
	return cell[1 : end+1], true
}

// optDocKeys lists the options of an options struct by their json names,
// with prefix.
func optDocKeys(typ reflect.Type, prefix string, into map[string]reflect.Type) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		into[prefix+name] = f.Type
	}
}

// optDocTypes are the names the page may give a field's type.
func optDocTypes(typ reflect.Type) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Name() == "Duration" {
		return []string{"duration"}
	}
	switch typ.Kind() {
	case reflect.String:
		return []string{"string", "size"}
	case reflect.Bool:
		return []string{"bool"}
	case reflect.Int, reflect.Int64:
		return []string{"integer"}
	case reflect.Slice:
		switch typ.Elem().Kind() {
		case reflect.String:
			return []string{"list of strings"}
		case reflect.Float64:
			return []string{"list of numbers"}
		}
		return []string{"list"}
	}
	return nil
}

// checkOptionsDoc compares the plugin's table with its options (keys) and
// with what the plugin makes of them (effective: the settings it runs
// with, for a section of the config file). Values in the page are YAML;
// "<data_dir>" in one stands for dataDir.
func checkOptionsDoc(t *testing.T, plugin string, keys map[string]reflect.Type, dataDir string,
	effective func(raw map[string]any) (any, error)) {
	t.Helper()
	defaults, err := effective(nil)
	if err != nil {
		t.Fatalf("%s with no options: %v", plugin, err)
	}
	seen := map[string]int{}
	for _, r := range optDocRows(t, plugin) {
		if prev, dup := seen[r.key]; dup {
			t.Errorf("%s:%d: %s %s is documented twice (also line %d)", optDocPath, r.line, plugin, r.key, prev)
		}
		seen[r.key] = r.line
		typ, ok := keys[r.key]
		if !ok {
			t.Errorf("%s:%d: %s has no option %s", optDocPath, r.line, plugin, r.key)
			continue
		}
		if allowed := optDocTypes(typ); !slices.Contains(allowed, r.typ) {
			t.Errorf("%s:%d: %s %s: type %q, want one of %q", optDocPath, r.line, plugin, r.key, r.typ, allowed)
		}
		if strings.Contains(r.key, "[]") {
			continue // an element's field: no default of the plugin's own
		}
		var value any
		if text, given := optDocQuoted(r.def); given {
			text = strings.ReplaceAll(text, "<data_dir>", dataDir)
			if err := yaml.Unmarshal([]byte(text), &value); err != nil {
				t.Errorf("%s:%d: %s %s: the default %q is not YAML: %v", optDocPath, r.line, plugin, r.key, text, err)
				continue
			}
		} else {
			// Described in words: the option's zero value must be its
			// default, for the kinds that have a plain one.
			switch typ.Kind() {
			case reflect.String:
				value = ""
			case reflect.Bool:
				value = false
			case reflect.Int:
				value = 0
			default:
				continue
			}
		}
		got, err := effective(map[string]any{r.key: value})
		if err != nil {
			t.Errorf("%s:%d: %s %s: the default %v is refused: %v", optDocPath, r.line, plugin, r.key, value, err)
			continue
		}
		if !reflect.DeepEqual(got, defaults) {
			t.Errorf("%s:%d: %s %s: the documented default %q is not the plugin's: with it %+v, without %+v",
				optDocPath, r.line, plugin, r.key, r.def, got, defaults)
		}
	}
	for key := range keys {
		if _, ok := seen[key]; !ok {
			t.Errorf("%s: the %s option %s is missing", optDocPath, plugin, key)
		}
	}
}
