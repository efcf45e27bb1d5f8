package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleFilesAreValid(t *testing.T) {
	files, _ := filepath.Glob("*.example.yaml")
	if len(files) < 2 {
		t.Fatalf("example files: %v", files)
	}
	for _, f := range files {
		cfg, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cfg, _ := Load("tableproxy.example.yaml")
	if cfg.Backend.ConnectTimeout != 5*time.Second || cfg.MaxPacketSize != 64<<20 || len(cfg.Plugins) != 5 ||
		!cfg.Users[1].Admin || cfg.Plugins[1].Options["rules"] == nil {
		t.Errorf("decoded %+v", cfg)
	}
}

func TestDefaultsApplyUnderFile(t *testing.T) {
	cfg, err := Load("minimal.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:6033" || cfg.ShutdownTimeout != 30*time.Second || cfg.Backend.PoolMaxIdle != 64 {
		t.Errorf("defaults lost: %+v", cfg)
	}
}

func TestUnknownFieldIsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("backend:\n  adr: x:1\n"), 0o600)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "adr") {
		t.Fatalf("got %v", err)
	}
}

func TestValidationNamesEveryBadField(t *testing.T) {
	cfg := Default()
	cfg.Listen = "nonsense"
	cfg.ListenSocket = "relative/tp.sock"
	cfg.Users = []User{{Name: "a"}, {Name: "a"}, {Name: ""}}
	cfg.AuthPlugin = "sha256_password"
	cfg.MaxPacketSize = 10
	cfg.Log.Level = "loud"
	cfg.TLS.Require = true
	cfg.Plugins = []Plugin{{Name: "metrics"}, {Name: "metrics"}}
	cfg.BinlogUser = "nobody"
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, field := range []string{"listen:", "listen_socket:", "backend.addr:", "users[1].name: duplicate", "users[2].name: required",
		"auth_plugin:", "max_packet_size:", "log.level:", "tls.require:", "plugins[1].name:", `binlog_user: "nobody" is not a configured user`} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %q:\n%v", field, err)
		}
	}
}

func TestListenSocketPath(t *testing.T) {
	for path, ok := range map[string]bool{
		"":                             true, // none
		"/run/tableproxy/mysqld.sock":  true,
		"/" + strings.Repeat("s", 106): true, // 107 bytes, the most sun_path takes
		"/" + strings.Repeat("s", 107): false,
		"tp.sock":                      false,
		"unix:/run/tableproxy/tp.sock": false, // a path, not backend.addr's form
	} {
		cfg := Default()
		cfg.Backend.Addr = "127.0.0.1:3306"
		cfg.Users = []User{{Name: "app", Password: "pw"}}
		cfg.ListenSocket = path
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("listen_socket %q: %v, want accepted=%v", path, err, ok)
		}
	}
	for _, backend := range []string{"/run/mysqld/mysqld.sock", "unix:/run/mysqld/mysqld.sock", "unix:/run/mysqld//mysqld.sock"} {
		cfg := Default()
		cfg.Backend.Addr = backend
		cfg.Users = []User{{Name: "app", Password: "pw"}}
		cfg.ListenSocket = "/run/mysqld/mysqld.sock"
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "backend.addr's socket") {
			t.Errorf("listen_socket on backend.addr %q: %v, want refused", backend, err)
		}
	}
}

func TestParseUserAndSizes(t *testing.T) {
	u, err := ParseUser("app:pa:ss", true)
	if err != nil || u.Name != "app" || u.Password != "pa:ss" || !u.Admin {
		t.Errorf("got %+v %v", u, err)
	}
	if _, err := ParseUser("nopassword", false); err == nil {
		t.Error("user without ':' accepted")
	}
	for in, want := range map[string]int64{"1024": 1024, "64MB": 64 << 20, "16k": 16 << 10, "1GiB": 1 << 30, "2 M": 2 << 20} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "MB", "-1", "1.5MB", "12XB"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPluginDefaults(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	absent, err := Load(write("absent.yaml", "listen: 127.0.0.1:1\n"))
	if err != nil || absent.Plugins != nil {
		t.Fatalf("no plugins section: %v %v", absent.Plugins, err)
	}
	none, err := Load(write("none.yaml", "plugins: []\n"))
	if err != nil || none.Plugins == nil || len(none.Plugins) != 0 {
		t.Fatalf("plugins: []: %#v %v", none.Plugins, err)
	}

	c := Config{
		Users:   []User{{Name: "app"}, {Name: "ops", Admin: true}, {Name: "dba", Admin: true}},
		Plugins: []Plugin{{Name: "ddloffload", Options: map[string]any{"workers": 2}}, {Name: "cache", Options: map[string]any{"binlog_user": "dba"}}},
	}
	c.SelectPlugins(ParsePluginList(" cache, ddloffload ,metrics"))
	if len(c.Plugins) != 3 || c.Plugins[0].Name != "cache" || c.Plugins[1].Options["workers"] != 2 || c.Plugins[2].Options != nil {
		t.Fatalf("selected: %#v", c.Plugins)
	}
	// A plugin's own binlog_user still names the user (deprecated); with
	// none, the first admin reads the log.
	if deprecated := c.ResolveBinlogUser(); c.BinlogUser != "dba" || len(deprecated) != 1 || deprecated[0] != "cache" {
		t.Fatalf("binlog user %q, deprecated options of %v", c.BinlogUser, deprecated)
	}
	d := Config{Users: c.Users, Plugins: []Plugin{{Name: "cache"}, {Name: "ddloffload"}}}
	if deprecated := d.ResolveBinlogUser(); d.BinlogUser != "ops" || len(deprecated) != 0 {
		t.Fatalf("by default: binlog user %q, deprecated options of %v", d.BinlogUser, deprecated)
	}
	e := Config{Users: c.Users, BinlogUser: "repl", Plugins: c.Plugins}
	if e.ResolveBinlogUser(); e.BinlogUser != "repl" {
		t.Fatalf("the top-level binlog_user: %q", e.BinlogUser)
	}
	if got := ParsePluginList("none"); len(got) != 0 {
		t.Fatalf("none: %v", got)
	}
}

// A password can be kept off the command line: in a file (its first
// line) or an environment variable; "@@" escapes a leading "@".
func TestResolvePassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TP_TEST_PW", "from-env")
	for spec, want := range map[string]string{
		"plain": "plain", "@" + file: "from-file", "@env:TP_TEST_PW": "from-env", "@@lead": "@lead", "": "",
	} {
		if got, err := ResolvePassword(spec); err != nil || got != want {
			t.Errorf("ResolvePassword(%q) = %q, %v; want %q", spec, got, err, want)
		}
	}
	for _, bad := range []string{"@env:TP_TEST_UNSET_PW", "@/no/such/file"} {
		if _, err := ResolvePassword(bad); err == nil {
			t.Errorf("ResolvePassword(%q): no error", bad)
		}
	}
	u, err := ParseUser("app:@env:TP_TEST_PW", false)
	if err != nil || u.Password != "from-env" {
		t.Fatalf("ParseUser: %+v, %v", u, err)
	}
	cfg := Default()
	if err := Parse([]byte("users:\n  - name: a\n    password_file: "+file+"\n  - name: b\n    password_env: TP_TEST_PW\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.resolvePasswords(); err != nil || cfg.Users[0].Password != "from-file" || cfg.Users[1].Password != "from-env" {
		t.Fatalf("password_file, password_env: %+v, %v", cfg.Users, err)
	}
	cfg.Users[0].PasswordEnv = "TP_TEST_PW"
	if err := cfg.resolvePasswords(); err == nil {
		t.Fatal("a user with two password sources was accepted")
	}
}

// A value of the wrong type is named by its setting and the form it
// takes, not by a Go type.
func TestTypeErrorsNameTheSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("max_connections: lots\nbackend:\n  connect_timeout: soon\nusers:\n  - name: a\n    admin: maybe\n"), 0o600)
	_, err := Load(path)
	for _, want := range []string{"line 1: max_connections: `lots` is not a whole number",
		"line 3: backend.connect_timeout: `soon` is not a duration such as 500ms, 5s or 2m",
		"line 6: users[0].admin: `maybe` is not true or false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}
