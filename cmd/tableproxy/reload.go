package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/configs"
	"tableproxy/plugins"
	"tableproxy/proxy"
)

// reloader re-reads the configuration (the file and the command line the
// proxy was started with) on SIGHUP, and applies what can change while
// the proxy runs: the users and their passwords (password files read
// again), the log level, and the clients' TLS certificate. What needs a
// restart is named in one log line. A file that does not load or check is
// refused whole: the running configuration stays.
type reloader struct {
	args  []string
	log   *slog.Logger
	level *slog.LevelVar
	users *proxy.Users
	// logins is told the accounts changed: pooled backend connections
	// opened before are not handed out again.
	logins *proxy.Logins
	cert   *atomic.Pointer[tls.Certificate] // the clients' TLS certificate, if TLS is on

	mu      sync.Mutex
	running configs.Config
}

// watch reloads on every SIGHUP until the process ends.
func (r *reloader) watch() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			r.log.Info("SIGHUP: reloading the configuration")
			_ = r.reload()
		}
	}()
}

// reload re-reads and applies the configuration, and says what it did
// (the log's line, also returned).
func (r *reloader) reload() error {
	_, err := r.reloadSaying()
	return err
}

// reloadSaying is reload, returning what the log says: what was applied
// and what needs a restart.
func (r *reloader) reloadSaying() (reloadSaid, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, _, _, _, err := serveConfig("serve", r.args)
	if err == nil {
		err = r.checkTLS(cfg)
	}
	if err != nil {
		r.log.Error("config: reload refused; the running configuration stays", "err", err)
		return reloadSaid{}, err
	}
	old := r.running
	var applied []string
	if users := proxyUsers(cfg); !maps.Equal(users, proxyUsers(old)) {
		r.users.Set(users)
		r.logins.Changed()
		applied = append(applied, fmt.Sprintf("users (%d)", len(users)))
	}
	if cfg.Log.Level != old.Log.Level {
		r.level.Set(levelOf(cfg.Log.Level))
		applied = append(applied, "log.level "+cfg.Log.Level)
	}
	if r.cert != nil && cfg.TLS.Cert != "" {
		// Read again, whether or not its file names changed: a renewed
		// certificate is often written over the old one.
		cert, _ := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key) // (checked above)
		r.cert.Store(&cert)
		applied = append(applied, "tls certificate")
	}
	restart := needRestart(old, cfg, r.cert != nil)
	r.running = cfg
	r.log.Info("config: reloaded", "applied", strings.Join(applied, ", "), "need_restart", strings.Join(restart, ", "))
	if len(restart) > 0 {
		r.log.Warn("config: these settings changed but take effect only when the proxy is restarted", "settings", strings.Join(restart, ", "))
	}
	return reloadSaid{applied: orNone(applied), restart: orNone(restart)}, nil
}

// reloadSaid is what a reload did: the settings applied and those that
// need a restart.
type reloadSaid struct{ applied, restart string }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// reloadAdmin answers ADMIN RELOAD CONFIG (admins only) as SIGHUP does:
// a row saying what was applied and what needs a restart, or the reason
// the file was refused.
type reloadAdmin struct{ r *reloader }

var reloadRE = regexp.MustCompile(`(?is)^\s*ADMIN\s+RELOAD\s+CONFIG\s*;?\s*$`)

func (a reloadAdmin) Name() string { return "reload" }

func (a reloadAdmin) OnStatement(st *plugins.Statement) plugins.Action {
	if st.Kind != plugins.KindAdmin || !reloadRE.MatchString(st.SQL) {
		return plugins.Continue
	}
	if !st.Admin {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
			"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation"))
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		said, err := a.r.reloadSaying()
		if err != nil {
			return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy: configuration not reloaded (the running one stays): "+err.Error()))
		}
		rs, err := mysql.BuildSimpleTextResultset([]string{"applied", "need_restart"}, [][]any{{said.applied, said.restart}})
		if err != nil {
			return err
		}
		return w.WriteResult(&mysql.Result{Status: w.Status(), Resultset: rs})
	}))
}

// checkTLS loads the new clients' certificate, if any, before anything
// is applied.
func (r *reloader) checkTLS(cfg configs.Config) error {
	if cfg.TLS.Cert == "" {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key); err != nil {
		return fmt.Errorf("tls.cert: %w", err)
	}
	return nil
}

// proxyUsers are cfg's users as the proxy holds them.
func proxyUsers(cfg configs.Config) map[string]proxy.User {
	users := map[string]proxy.User{}
	for _, u := range cfg.Users {
		users[u.Name] = proxy.User{Name: u.Name, Password: u.Password, Admin: u.Admin}
	}
	return users
}

func levelOf(s string) slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s))
	return level
}

// needRestart names the settings (as the config file names them) that
// differ between old and cfg and are read only at start: all but the
// users, the log level and, when TLS is on, the certificate's files.
func needRestart(old, cfg configs.Config, tlsReloads bool) []string {
	clear := func(c *configs.Config) {
		c.Users = nil
		c.Log.Level = ""
		if tlsReloads && c.TLS.Cert != "" {
			c.TLS.Cert, c.TLS.Key = "", ""
		}
	}
	clear(&old)
	clear(&cfg)
	var names []string
	diffFields(reflect.ValueOf(old), reflect.ValueOf(cfg), "", &names)
	return names
}

// diffFields appends the yaml names of the fields that differ, going
// into nested sections.
func diffFields(a, b reflect.Value, prefix string, names *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			name = strings.ToLower(f.Name)
		}
		av, bv := a.Field(i), b.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			diffFields(av, bv, prefix+name+".", names)
			continue
		}
		if !reflect.DeepEqual(av.Interface(), bv.Interface()) {
			*names = append(*names, prefix+name)
		}
	}
}
