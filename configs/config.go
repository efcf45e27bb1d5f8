package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration file. Every option is described in
// docs/configuration.md, which docs_test.go keeps in step with these
// structs and with Default.
type Config struct {
	Listen          string        `yaml:"listen"`
	ListenSocket    string        `yaml:"listen_socket"` // a Unix socket for local clients as well; none when empty
	Backend         Backend       `yaml:"backend"`
	Users           []User        `yaml:"users"`
	TLS             ClientTLS     `yaml:"tls"`
	AuthPlugin      string        `yaml:"auth_plugin"`
	MaxConnections  int           `yaml:"max_connections"`
	MaxPacketSize   ByteSize      `yaml:"max_packet_size"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	LoginTimeout    time.Duration `yaml:"login_timeout"`
	DataDir         string        `yaml:"data_dir"`
	MetricsListen   string        `yaml:"metrics_listen"`
	PprofListen     string        `yaml:"pprof_listen"`
	// MemoryLimit is the process-wide memory the proxy keeps within (see
	// internal/memlimit): the runtime's soft limit, and the caches are
	// shed when the live heap nears it.
	MemoryLimit ByteSize `yaml:"memory_limit"`
	Log         Log      `yaml:"log"`
	Plugins     []Plugin `yaml:"plugins"`
	Cluster     Cluster  `yaml:"cluster"`
	// BinlogUser is the user the proxy reads the backend's binary log as,
	// for every plugin that needs it (one stream per proxy); it needs
	// REPLICATION SLAVE and REPLICATION CLIENT (BINLOG MONITOR on MariaDB)
	// on the backend. By default, the first admin user (see
	// ResolveBinlogUser).
	BinlogUser string `yaml:"binlog_user"`
}

// Cluster configures this proxy's membership in a cluster of proxies.
// Empty, the proxy bootstraps a cluster of one by itself.
type Cluster struct {
	NodeID     string `yaml:"node_id"`     // default: generated, kept in the data directory
	RaftListen string `yaml:"raft_listen"` // Raft and the cluster API; default 127.0.0.1 on any free port
	Join       string `yaml:"join"`        // any member's raft_listen address
	NonVoter   bool   `yaml:"nonvoter"`    // join without a vote (sidecars)
	// Lease is how long a proxy may serve from memory after a renewal;
	// LeaseMargin is taken off it for clock drift.
	Lease       time.Duration `yaml:"lease"`
	LeaseMargin time.Duration `yaml:"lease_margin"`
	// RemoveDeadAfter is how long the leader waits, after the last lease
	// renewal it applied from a non-voter, before it removes that member
	// (0: never). Voters are only ever removed by an admin.
	RemoveDeadAfter time.Duration `yaml:"remove_dead_after"`
	// TLS makes the members' connections mutual TLS (cluster/tls.go).
	TLS ClusterTLS `yaml:"tls"`
}

// ClusterTLS is this node's certificate and key and the cluster's CA; or,
// Insecure, plain TCP on an address others can reach.
type ClusterTLS struct {
	Cert     string `yaml:"cert"`
	Key      string `yaml:"key"`
	CA       string `yaml:"ca"`
	Insecure bool   `yaml:"insecure"`
}

// On reports whether the members speak TLS.
func (t ClusterTLS) On() bool { return t.Cert != "" }

// Backend is the MySQL or MariaDB server behind the proxy.
type Backend struct {
	Addr            string        `yaml:"addr"` // host:port, or unix:/path (or /path) for a local socket
	ConnectTimeout  time.Duration `yaml:"connect_timeout"`
	PoolMaxIdle     int           `yaml:"pool_max_idle"`
	PoolIdleTimeout time.Duration `yaml:"pool_idle_timeout"`
	TLS             BackendTLS    `yaml:"tls"`
}

// BackendTLS configures TLS from the proxy to the backend.
type BackendTLS struct {
	Enabled    bool   `yaml:"enabled"`
	CA         string `yaml:"ca"`          // PEM bundle to verify the backend; empty = system roots
	ServerName string `yaml:"server_name"` // defaults to the host of backend.addr
	SkipVerify bool   `yaml:"skip_verify"` // for testing only
	Cert       string `yaml:"cert"`        // client certificate, if the backend requires one
	Key        string `yaml:"key"`
}

// ClientTLS configures TLS for clients connecting to the proxy.
type ClientTLS struct {
	Cert    string `yaml:"cert"`
	Key     string `yaml:"key"`
	Require bool   `yaml:"require"`
}

// User is an account the proxy accepts; the backend must have the same
// user with the same password.
type User struct {
	Name     string `yaml:"name"`
	Password string `yaml:"password"`
	// PasswordFile and PasswordEnv name where the password is instead:
	// a file (its first line) or an environment variable.
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	Admin        bool   `yaml:"admin"`
}

// Log configures the process log.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Plugin enables one plugin, in chain order.
type Plugin struct {
	Name    string         `yaml:"name"`
	Options map[string]any `yaml:"options"`
}

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		Listen:          "127.0.0.1:6033",
		AuthPlugin:      "mysql_native_password",
		MaxConnections:  1024,
		MaxPacketSize:   64 << 20,
		MemoryLimit:     1 << 30,
		ShutdownTimeout: 30 * time.Second,
		LoginTimeout:    10 * time.Second,
		DataDir:         "./data",
		Backend: Backend{
			ConnectTimeout:  5 * time.Second,
			PoolMaxIdle:     64,
			PoolIdleTimeout: 60 * time.Second,
		},
		Log: Log{Level: "info", Format: "text"},
		// 30 s is fifteen 2 s leases: no GC pause or CPU throttling
		// silences a live sidecar that long, and removing one that was
		// only cut off costs little (it joins again when it can reach the
		// cluster). Short enough that membership stays bounded under a
		// deploy's churn: sidecars stopped with SIGTERM leave at once, so
		// only the ones killed outright linger, at most the replacement
		// rate times 30 s of them (a whole deploy of pods killed one every
		// 2 s leaves at most 15 dead members at any moment).
		Cluster: Cluster{RemoveDeadAfter: 30 * time.Second},
	}
}

// Load reads a YAML file over the defaults. Unknown fields are errors.
func Load(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := Parse(data, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.resolvePasswords(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes YAML into cfg, keeping cfg's values for absent fields.
func Parse(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return namedTypeError(data, te)
		}
		return err
	}
	return nil
}

// typeErrRE is one of yaml's type errors: "line N: cannot unmarshal !!tag
// `value` into type".
var typeErrRE = regexp.MustCompile("^line (\\d+): cannot unmarshal !!\\w+ `(.*)` into (.+)$")

// namedTypeError rewrites yaml's type errors, which name a line and a Go
// type, to name the setting and the form it takes:
// "line 2: max_connections: `lots` is not a whole number".
func namedTypeError(data []byte, te *yaml.TypeError) error {
	var root yaml.Node
	paths := map[int]string{}
	if yaml.Unmarshal(data, &root) == nil {
		settingPaths(&root, "", paths)
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		m := typeErrRE.FindStringSubmatch(e)
		if m == nil {
			msgs[i] = e
			continue
		}
		line, _ := strconv.Atoi(m[1])
		setting := paths[line]
		if setting == "" {
			setting = "a setting"
		}
		msgs[i] = fmt.Sprintf("line %d: %s: `%s` is not %s", line, setting, m[2], formOf(m[3]))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// settingPaths records, by line, the path of each value in n (users[0].admin).
func settingPaths(n *yaml.Node, prefix string, into map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			settingPaths(c, prefix, into)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			path := n.Content[i].Value
			if prefix != "" {
				path = prefix + "." + path
			}
			into[n.Content[i+1].Line] = path
			settingPaths(n.Content[i+1], path, into)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			path := fmt.Sprintf("%s[%d]", prefix, i)
			into[c.Line] = path
			settingPaths(c, path, into)
		}
	}
}

// formOf is what a value of Go type typ is written as in the file.
func formOf(typ string) string {
	switch {
	case typ == "time.Duration":
		return "a duration such as 500ms, 5s or 2m"
	case typ == "bool":
		return "true or false"
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint"):
		return "a whole number"
	case strings.HasPrefix(typ, "float"):
		return "a number"
	case strings.HasPrefix(typ, "[]"):
		return "a list"
	case strings.HasPrefix(typ, "map["), strings.Contains(typ, "."):
		return "a section of settings"
	}
	return "a " + typ
}

// loopbackOnly reports whether addr (host:port; empty: the default,
// 127.0.0.1) can be reached from this host alone.
func loopbackOnly(addr string) bool {
	if addr == "" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// socketPath reads a backend address given as a local socket, "unix:/path"
// or "/path"; ok is false for host:port.
func socketPath(addr string) (path string, ok bool) {
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "unix:") {
		return strings.TrimPrefix(addr, "unix:"), true
	}
	return "", false
}

// Validate checks cfg and returns every problem found, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	checkAddr := func(field, addr string, required bool) {
		if addr == "" {
			if required {
				bad(field, "required (host:port)")
			}
			return
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			bad(field, "%q is not host:port", addr)
		}
	}
	checkAddr("listen", c.Listen, true)
	backendSocket, onSocket := socketPath(c.Backend.Addr)
	if p := c.ListenSocket; p != "" {
		// sun_path holds 108 bytes with its terminating NUL.
		if !filepath.IsAbs(p) || len(p) > 107 {
			bad("listen_socket", "%q is not an absolute path of at most 107 bytes", p)
		} else if onSocket && filepath.Clean(backendSocket) == filepath.Clean(p) {
			// With the backend down at start, its socket would look stale
			// and be replaced by the proxy's own.
			bad("listen_socket", "%q is backend.addr's socket", p)
		}
	}
	if !onSocket {
		checkAddr("backend.addr", c.Backend.Addr, true)
	}
	checkAddr("metrics_listen", c.MetricsListen, false)
	checkAddr("pprof_listen", c.PprofListen, false)
	checkAddr("cluster.raft_listen", c.Cluster.RaftListen, false)
	checkAddr("cluster.join", c.Cluster.Join, false)
	if c.Cluster.Join != "" && c.Cluster.RaftListen == "" {
		bad("cluster.raft_listen", "required with cluster.join (the address the other members reach this one at)")
	}
	if c.Cluster.Lease < 0 || c.Cluster.LeaseMargin < 0 || (c.Cluster.Lease > 0 && c.Cluster.LeaseMargin >= c.Cluster.Lease) {
		bad("cluster.lease_margin", "must be below cluster.lease, and neither negative")
	}
	switch tl := c.Cluster.TLS; {
	case (tl.Cert != "") != (tl.Key != "") || (tl.Cert != "") != (tl.CA != ""):
		bad("cluster.tls", "set cert, key and ca together")
	case tl.On() && tl.Insecure:
		bad("cluster.tls.insecure", "set with a certificate: choose one")
	case !tl.On() && !tl.Insecure && !loopbackOnly(c.Cluster.RaftListen):
		bad("cluster.tls", "raft_listen %q is reachable from other hosts: give the members certificates (cert, key, ca; see tableproxy cluster-certs), or set insecure: true to let anyone who reaches it join the cluster", c.Cluster.RaftListen)
	}
	if c.Cluster.RemoveDeadAfter < 0 {
		bad("cluster.remove_dead_after", "must not be negative (0 never removes a member)")
	}
	if c.Backend.ConnectTimeout <= 0 {
		bad("backend.connect_timeout", "must be positive")
	}
	if c.Backend.PoolIdleTimeout <= 0 {
		bad("backend.pool_idle_timeout", "must be positive")
	}
	if c.Backend.TLS.SkipVerify && !c.Backend.TLS.Enabled {
		bad("backend.tls.skip_verify", "set without backend.tls.enabled")
	}
	if (c.Backend.TLS.Cert == "") != (c.Backend.TLS.Key == "") {
		bad("backend.tls.cert", "cert and key must be given together")
	}
	if len(c.Users) == 0 {
		bad("users", "at least one user is required (--user name:password)")
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		field := fmt.Sprintf("users[%d]", i)
		switch {
		case u.Name == "":
			bad(field+".name", "required")
		case seen[u.Name]:
			bad(field+".name", "duplicate user %q", u.Name)
		}
		seen[u.Name] = true
	}
	if c.BinlogUser != "" && len(c.Users) > 0 && !seen[c.BinlogUser] {
		names := make([]string, 0, len(c.Users))
		for _, u := range c.Users {
			names = append(names, u.Name)
		}
		bad("binlog_user", "%q is not a configured user (the binary log is read with a configured user's password): add it to users (or --admin-user name:password), or name one of %s",
			c.BinlogUser, strings.Join(names, ", "))
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls.cert", "cert and key must be given together")
	}
	if c.TLS.Require && c.TLS.Cert == "" {
		bad("tls.require", "set without tls.cert and tls.key")
	}
	switch c.AuthPlugin {
	case "mysql_native_password", "caching_sha2_password":
	default:
		bad("auth_plugin", "%q: use mysql_native_password or caching_sha2_password", c.AuthPlugin)
	}
	if c.MaxConnections <= 0 {
		bad("max_connections", "must be positive")
	}
	if c.MaxPacketSize < 1024 || c.MaxPacketSize > 1<<30 {
		bad("max_packet_size", "must be between 1KB and 1GB")
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive")
	}
	if c.MemoryLimit < 64<<20 {
		bad("memory_limit", "must be at least 64MB")
	}
	if c.LoginTimeout <= 0 {
		bad("login_timeout", "must be positive")
	}
	if c.DataDir == "" {
		bad("data_dir", "required")
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: use debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q: use text or json", c.Log.Format)
	}
	names := map[string]bool{}
	for i, p := range c.Plugins {
		field := fmt.Sprintf("plugins[%d].name", i)
		switch {
		case p.Name == "":
			bad(field, "required")
		case names[p.Name]:
			bad(field, "plugin %q enabled twice", p.Name)
		}
		names[p.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  %w", joinIndented(errs))
	}
	return nil
}

func joinIndented(errs []error) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return errors.New(strings.Join(lines, "\n  "))
}

// ParseUser parses "name:password" as given to --user.
func ParseUser(s string, admin bool) (User, error) {
	name, pw, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return User{}, fmt.Errorf("%q: want name:password", s)
	}
	pw, err := ResolvePassword(pw)
	if err != nil {
		return User{}, fmt.Errorf("user %s: %w", name, err)
	}
	return User{Name: name, Password: pw, Admin: admin}, nil
}

// ResolvePassword reads a password given on a command line so that it
// need not be there: "@/path" is the first line of a file, "@env:NAME" an
// environment variable's value, "@@..." a password that begins with "@";
// anything else is the password itself.
func ResolvePassword(spec string) (string, error) {
	switch {
	case strings.HasPrefix(spec, "@@"):
		return spec[1:], nil
	case strings.HasPrefix(spec, "@env:"):
		return passwordFromEnv(spec[len("@env:"):])
	case strings.HasPrefix(spec, "@"):
		return passwordFromFile(spec[1:])
	}
	return spec, nil
}

func passwordFromEnv(name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("password: environment variable %s is not set", name)
	}
	return v, nil
}

func passwordFromFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSuffix(line, "\r"), nil
}

// resolvePasswords reads the users' password_file and password_env.
func (c *Config) resolvePasswords() error {
	for i := range c.Users {
		u := &c.Users[i]
		set := 0
		for _, v := range []string{u.Password, u.PasswordFile, u.PasswordEnv} {
			if v != "" {
				set++
			}
		}
		if set > 1 {
			return fmt.Errorf("users[%d] (%s): set one of password, password_file and password_env", i, u.Name)
		}
		var err error
		switch {
		case u.PasswordFile != "":
			u.Password, err = passwordFromFile(u.PasswordFile)
		case u.PasswordEnv != "":
			u.Password, err = passwordFromEnv(u.PasswordEnv)
		}
		if err != nil {
			return fmt.Errorf("users[%d] (%s): %w", i, u.Name, err)
		}
	}
	return nil
}

// LoosePasswords says why a config file that holds passwords in clear is
// readable by others than its owner ("" when it is not): serve logs it.
func LoosePasswords(path string, c Config) string {
	inline := false
	for _, u := range c.Users {
		inline = inline || u.Password != "" && u.PasswordFile == "" && u.PasswordEnv == ""
	}
	fi, err := os.Stat(path)
	if !inline || err != nil || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("%s holds passwords and is readable by others (mode %#o): chmod 600 it, or give users password_file or password_env", path, fi.Mode().Perm())
}

// ByteSize is a size in bytes, written as 1024, "64MB", "16KiB" or "1G".
type ByteSize int

// UnmarshalYAML accepts a plain number or a number with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = ByteSize(v)
	return nil
}

// UnmarshalJSON accepts a number or a string ("64MB"): a plugin's
// options reach it as JSON, where YAML's 0 is a number.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses "64MB", "16k", "1GiB" or a plain number of bytes.
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	var v int64
	if _, err := fmt.Sscanf(t, "%d", &v); err != nil || v < 0 || fmt.Sprint(v) != t {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with KB, MB or GB", s)
	}
	return v * mult, nil
}
