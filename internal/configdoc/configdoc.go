// Package configdoc reads the option tables of docs/configuration.md for
// the tests that keep the page and the code in step: the configuration
// file's own options (package configs) and each plugin's (cache,
// ddloffload, plugins). A table follows a marker line such as
// "<!-- options: configs -->" or "<!-- options: plugin cache -->"; its
// first column names one option in backquotes, and its "type" and
// "default" columns say what the code must agree with.
//
// It is for tests only: it imports testing, and the standard library and
// YAML decoder besides.
package configdoc

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Name is how messages name the page: from the repository's root.
const Name = "docs/configuration.md"

// path is the page in this checkout: this file is internal/configdoc.
func path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", Name)
}

// Row is one row of an options table.
type Row struct {
	Line               int    // in the page, from 1
	Key, Type, Default string // the option, and its "type" and "default" cells
	Cells              map[string]string
}

// Tables returns the rows of every table that follows a line that is
// marker, in the page's order; the test fails when there is none.
func Tables(tb testing.TB, marker string) []Row {
	tb.Helper()
	data, err := os.ReadFile(path())
	if err != nil {
		tb.Fatalf("the configuration reference: %v", err)
	}
	lines := strings.Split(string(data), "\n")
	var rows []Row
	found := 0
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != marker {
			continue
		}
		found++
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j+1 >= len(lines) || !strings.HasPrefix(lines[j], "|") {
			tb.Fatalf("%s:%d: %s is not followed by a table", Name, i+1, marker)
		}
		header := cells(lines[j])
		for j += 2; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			cs := cells(lines[j])
			if len(cs) != len(header) {
				tb.Fatalf("%s:%d: %d cells, the header has %d", Name, j+1, len(cs), len(header))
			}
			row := Row{Line: j + 1, Cells: map[string]string{}}
			for k, h := range header {
				row.Cells[h] = cs[k]
			}
			name, ok := Quoted(cs[0])
			if !ok || "`"+name+"`" != cs[0] {
				tb.Fatalf("%s:%d: the first cell must be one name in backquotes, not %q", Name, j+1, cs[0])
			}
			row.Key, row.Type, row.Default = name, row.Cells["type"], row.Cells["default"]
			rows = append(rows, row)
		}
		i = j
	}
	if found == 0 {
		tb.Fatalf("%s: no %s table", Name, marker)
	}
	return rows
}

func cells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	cs := strings.Split(line, "|")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}

// Quoted returns the first value in backquotes in cell, if the cell
// begins with one.
func Quoted(cell string) (string, bool) {
	if !strings.HasPrefix(cell, "`") {
		return "", false
	}
	end := strings.Index(cell[1:], "`")
	if end < 0 {
		return "", false
	}
	return cell[1 : end+1], true
}

// Keys adds the options of an options struct, by their json names with
// prefix, to into.
func Keys(typ reflect.Type, prefix string, into map[string]reflect.Type) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		into[prefix+name] = f.Type
	}
}

// pluginTypes are the names the page may give a plugin option's type.
func pluginTypes(typ reflect.Type) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Name() {
	case "Duration":
		return []string{"duration"}
	case "ByteSize":
		return []string{"size"}
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

// PluginRows are the rows of the plugin's options table.
func PluginRows(tb testing.TB, plugin string) []Row {
	tb.Helper()
	return Tables(tb, "<!-- options: plugin "+plugin+" -->")
}

// CheckPlugin compares the plugin's table with its options (keys) and
// with what the plugin makes of them (effective: the settings it runs
// with, for a section of the config file): every option listed once, no
// other, each with a type that fits its field, and with the default the
// plugin uses, since setting an option to its documented default must
// change nothing. Values in the page are YAML; "<data_dir>" in one stands
// for dataDir.
func CheckPlugin(tb testing.TB, plugin string, keys map[string]reflect.Type, dataDir string,
	effective func(raw map[string]any) (any, error)) {
	tb.Helper()
	defaults, err := effective(nil)
	if err != nil {
		tb.Fatalf("%s with no options: %v", plugin, err)
	}
	seen := map[string]int{}
	for _, r := range PluginRows(tb, plugin) {
		if prev, dup := seen[r.Key]; dup {
			tb.Errorf("%s:%d: %s %s is documented twice (also line %d)", Name, r.Line, plugin, r.Key, prev)
		}
		seen[r.Key] = r.Line
		typ, ok := keys[r.Key]
		if !ok {
			tb.Errorf("%s:%d: %s has no option %s", Name, r.Line, plugin, r.Key)
			continue
		}
		if allowed := pluginTypes(typ); !slices.Contains(allowed, r.Type) {
			tb.Errorf("%s:%d: %s %s: type %q, want one of %q", Name, r.Line, plugin, r.Key, r.Type, allowed)
		}
		if strings.Contains(r.Key, "[]") {
			continue // an element's field: no default of the plugin's own
		}
		var value any
		if text, given := Quoted(r.Default); given {
			text = strings.ReplaceAll(text, "<data_dir>", dataDir)
			if err := yaml.Unmarshal([]byte(text), &value); err != nil {
				tb.Errorf("%s:%d: %s %s: the default %q is not YAML: %v", Name, r.Line, plugin, r.Key, text, err)
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
		got, err := effective(map[string]any{r.Key: value})
		if err != nil {
			tb.Errorf("%s:%d: %s %s: the default %v is refused: %v", Name, r.Line, plugin, r.Key, value, err)
			continue
		}
		if !reflect.DeepEqual(got, defaults) {
			tb.Errorf("%s:%d: %s %s: the documented default %q is not the plugin's: with it %+v, without %+v",
				Name, r.Line, plugin, r.Key, r.Default, got, defaults)
		}
	}
	for key := range keys {
		if _, ok := seen[key]; !ok {
			tb.Errorf("%s: the %s option %s is missing", Name, plugin, key)
		}
	}
}
