package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tableproxy/proxy"
)

// A reload applies the users and the log level, names what needs a
// restart, and refuses a file that does not check, keeping what runs.
func TestReloadAppliesOrRefusesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tableproxy.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte("backend: {addr: 127.0.0.1:3306}\nplugins: []\n"+s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("users: [{name: a, password: x}]\nlog: {level: info}\n")
	args := []string{"--config", path}
	cfg, _, _, _, err := serveConfig("serve", args)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	level := new(slog.LevelVar)
	r := &reloader{args: args, log: slog.New(slog.NewTextHandler(&out, nil)), level: level,
		users: proxy.NewUsers(proxyUsers(cfg)), logins: &proxy.Logins{}, running: cfg}

	write("users: [{name: a, password: y}, {name: b, password: z}]\nlog: {level: warn}\nmax_connections: 9\ncluster: {lease: 3s}\n")
	if err := r.reload(); err != nil {
		t.Fatal(err)
	}
	if u, ok := r.users.Get("a"); !ok || u.Password != "y" || r.users.Len() != 2 {
		t.Errorf("users after the reload: a %+v, %d users", u, r.users.Len())
	}
	if level.Level() != slog.LevelWarn {
		t.Errorf("log level %v, want WARN", level.Level())
	}
	if !strings.Contains(out.String(), `need_restart="max_connections, cluster.lease"`) {
		t.Errorf("the log does not name what needs a restart:\n%s", out.String())
	}

	write("users: [{name: a, password: y}, {name: a, password: w}]\nmax_connections: -1\n")
	if err := r.reload(); err == nil {
		t.Error("a file that does not check was taken")
	}
	if u, _ := r.users.Get("a"); u.Password != "y" || r.users.Len() != 2 || level.Level() != slog.LevelWarn {
		t.Errorf("after a refused reload: a %+v, %d users, level %v", u, r.users.Len(), level.Level())
	}
}

// A user named twice in the file, or twice on the command line, is
// refused, naming it; a flag's user takes the place of the file's.
func TestDuplicateUsersRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tableproxy.yaml")
	if err := os.WriteFile(path, []byte("backend: {addr: 127.0.0.1:3306}\nplugins: []\nusers: [{name: a, password: x}, {name: a, password: y}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := serveConfig("serve", []string{"--config", path}); err == nil || !strings.Contains(err.Error(), `duplicate user "a"`) {
		t.Errorf("a user twice in the file: %v", err)
	}
	if _, _, _, _, err := serveConfig("serve", []string{"--backend", "127.0.0.1:3306", "--user", "b:1", "--user", "b:2"}); err == nil || !strings.Contains(err.Error(), `duplicate user "b"`) {
		t.Errorf("a user twice on the command line: %v", err)
	}
	if err := os.WriteFile(path, []byte("backend: {addr: 127.0.0.1:3306}\nplugins: []\nusers: [{name: a, password: x}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, _, _, err := serveConfig("serve", []string{"--config", path, "--user", "a:z"})
	if err != nil || len(cfg.Users) != 1 || cfg.Users[0].Password != "z" {
		t.Errorf("a flag's user over the file's: %+v, %v", cfg.Users, err)
	}
}
