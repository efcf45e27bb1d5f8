package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigChecksPluginOptions: check-config refuses what serve
// refuses in a plugin's options, each named as serve names it (the
// plugin's place in the config's list, its name, the field), and passes a
// configuration serve takes.
func TestCheckConfigChecksPluginOptions(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"plugins:\n  - name: cache\n    options: {max_table_sise: 1MB}\n", `plugins[0] (cache): options: json: unknown field "max_table_sise"`},
		{"plugins:\n  - name: metrics\n  - name: ddloffload\n    options: {sort_memory: lots}\n", `plugins[1] (ddloffload): sort_memory: size "lots"`},
		{"plugins:\n  - name: metrics\n    options: {bukets: [1]}\n", `plugins[0] (metrics): options: json: unknown field "bukets"`},
		{"plugins:\n  - name: digest\n    options: {top: 0}\n", `plugins[0] (digest): top: 0 is not between`},
		{"plugins:\n  - name: querylog\n    options: {treshold: 1s}\n", `plugins[0] (querylog): options: json: unknown field "treshold"`},
		{"plugins:\n  - name: cache\n    options: {max_table_size: 1MB}\n  - name: ddloffload\n    options: {workers: 2}\n  - name: digest\n  - name: metrics\n", ""},
	} {
		path := filepath.Join(t.TempDir(), "tableproxy.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkConfig([]string{"--config", path, "--backend", "127.0.0.1:3306", "--user", "app:pw", "--admin-user", "admin:pw"})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want valid", c.yaml, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %s", c.yaml, err, c.want)
		}
	}
}
