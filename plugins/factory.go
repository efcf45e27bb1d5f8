package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/binlog"
)

// Env is what the proxy gives a plugin when it is built.
type Env struct {
	Logger *slog.Logger
	// Metrics is where plugins register Prometheus collectors; the command
	// serves it on --metrics-listen.
	Metrics prometheus.Registerer
	// DataDir is where plugins keep durable state (each in its own file).
	DataDir string
	// Backend opens connections to the backend for plugins' own work
	// (loading a table, checking a schema), as a configured proxy user.
	Backend Backend
	// Binlog is the proxy's one reader of the backend's binary log, which
	// plugins that need the log subscribe to.
	Binlog *binlog.Follower
	// Transactions is the proxy's account of its sessions' transactions.
	Transactions Transactions
}

// Transactions is the proxy's account of the transactions of all its
// sessions, for a plugin that must wait for those open at some moment.
type Transactions interface {
	// Mark advances the proxy's transaction clock and returns its new
	// reading: a transaction begun from now on has a TxView.Since of at
	// least that.
	Mark() uint64
	// OpenBefore lists the sessions (by client connection id) in a
	// transaction, or running a statement that may begin one (any but
	// DDL), whose transaction began before mark. A session that has sent
	// BEGIN and nothing else counts, though the backend does not list its
	// transaction yet.
	OpenBefore(mark uint64) []uint32
}

// Backend opens backend connections as a configured proxy user, with that
// user's password (so the backend's grants apply to plugins' work too).
type Backend interface {
	Connect(ctx context.Context, user, db string) (*client.Conn, error)
	// AccountsChanged tells the proxy that the backend's accounts may have
	// changed (a GRANT or REVOKE, a password, a lock) in a way the proxy
	// did not see, e.g. in the binary log: its pooled connections then log
	// in afresh before serving a new session.
	AccountsChanged()
}

// Options is a plugin's section of the config file, as decoded from it.
type Options map[string]any

// Factory builds a plugin from its options.
type Factory func(opts Options, env Env) (Plugin, error)

// Spec names a plugin to enable and its options, in chain order.
type Spec struct {
	Name    string
	Options Options
}

// Build builds the chain from specs with factories. An unknown name or bad
// options fail with an error naming the plugin (and, through DecodeOptions,
// the field).
func Build(specs []Spec, env Env, factories Factories) (*Chain, error) {
	if err := checkOrder(specs); err != nil {
		return nil, err
	}
	var ps []Plugin
	for i, s := range specs {
		f, ok := factories[s.Name]
		if !ok {
			return nil, fmt.Errorf("plugins[%d]: unknown plugin %q (known: %s)", i, s.Name, strings.Join(factories.Names(), ", "))
		}
		p, err := f(s.Options, env)
		if err != nil {
			NewChain(ps...).Close()
			return nil, fmt.Errorf("plugins[%d] (%s): %w", i, s.Name, err)
		}
		ps = append(ps, p)
	}
	return NewChain(ps...), nil
}

// answering are the plugins that answer statements themselves (reads from
// memory, ADD INDEX as a job): a plugin after them on the chain never sees
// what they answer.
var answering = []string{"cache", "ddloffload"}

// checkOrder refuses a chain where the firewall comes after a plugin that
// answers statements: its rules would not apply to what that plugin
// answers (a denied read of a cached table would be served from memory).
func checkOrder(specs []Spec) error {
	for i, s := range specs {
		if s.Name != "firewall" {
			continue
		}
		for j := 0; j < i; j++ {
			if slices.Contains(answering, specs[j].Name) {
				return fmt.Errorf("plugins[%d] (firewall): must be listed before plugins[%d] (%s), which answers statements the firewall would then never see", i, j, specs[j].Name)
			}
		}
	}
	return nil
}

// DecodeOptions decodes opts into dst (a pointer to a struct with json tags).
// Unknown fields are an error that names them, so a typo in the config file
// does not silently leave a default in place.
func DecodeOptions(opts Options, dst any) error {
	if len(opts) == 0 {
		return nil
	}
	raw, err := json.Marshal(map[string]any(opts))
	if err != nil {
		return fmt.Errorf("options: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// Duration is a time.Duration written in config files as "200ms" or "1.5s".
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // an empty value in the file: keep the default
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want a string like \"200ms\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// CheckBuiltin checks a built-in plugin's options as its factory does,
// without a running proxy: the plugin is built against a throwaway
// environment (no backend, a registry of its own for its metrics) and
// closed again. known is false for a name that is not a built-in.
func CheckBuiltin(name string, opts Options) (known bool, err error) {
	f, ok := Builtins()[name]
	if !ok {
		return false, nil
	}
	p, err := f(opts, Env{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: prometheus.NewRegistry()})
	if err != nil {
		return true, err
	}
	NewChain(p).Close()
	return true, nil
}
