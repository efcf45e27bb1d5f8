package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tableproxy/binlog"
	"tableproxy/cache"
	"tableproxy/cluster"
	"tableproxy/configs"
	"tableproxy/ddloffload"
	"tableproxy/digest"
	"tableproxy/internal/lograte"
	"tableproxy/internal/memlimit"
	"tableproxy/plugins"
	"tableproxy/proxy"
	"tableproxy/vschema"
)

// userList collects repeated --user / --admin-user flags.
type userList struct {
	admin bool
	users *[]configs.User
}

func (l userList) String() string { return "" }
func (l userList) Set(s string) error {
	u, err := configs.ParseUser(s, l.admin)
	if err != nil {
		return err
	}
	*l.users = append(*l.users, u)
	return nil
}

// errUsage marks an error in the command line (exit status 2), as against
// one in the configuration it names (status 1).
var errUsage = errors.New("usage")

// serveConfig reads the configuration serve runs with: the file --config
// names, over the defaults, then the flags over it, validated. check is
// --check (check and exit); deprecated lists the plugins whose deprecated
// binlog_user option was used. A bad flag is an errUsage; help asked for
// is flag.ErrHelp.
func serveConfig(name string, args []string) (cfg configs.Config, check bool, deprecated []string, loose string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file (flags override it)")
	checkOnly := fs.Bool("check", false, "check the configuration and the flags, then exit (as tableproxy check-config)")
	listen := fs.String("listen", "", "client address (default 127.0.0.1:6033)")
	listenSocket := fs.String("listen-socket", "", "Unix socket path for local clients as well (none by default)")
	backend := fs.String("backend", "", "backend MySQL/MariaDB host:port")
	dataDir := fs.String("data-dir", "", "directory for the proxy's durable state (default ./data)")
	metricsListen := fs.String("metrics-listen", "", "address for /metrics (off when empty)")
	pprofListen := fs.String("pprof-listen", "", "address for Go's profiles, /debug/pprof/ (off when empty; keep it on loopback)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	memoryLimit := fs.String("memory-limit", "", "process-wide memory the proxy keeps within, e.g. 1GB (the default)")
	nodeID := fs.String("node-id", "", "this proxy's id in its cluster (default: generated, kept in the data dir)")
	raftListen := fs.String("raft-listen", "", "address for Raft and the cluster API, reachable by the other proxies")
	join := fs.String("join", "", "host:port (raft-listen) of any member of the cluster to join")
	nonVoter := fs.Bool("raft-nonvoter", false, "join as a non-voting member")
	clusterCert := fs.String("cluster-cert", "", "this node's certificate for the members' mutual TLS (PEM; see tableproxy cluster-certs)")
	clusterKey := fs.String("cluster-key", "", "its key (PEM)")
	clusterCA := fs.String("cluster-ca", "", "the cluster's CA certificate (PEM)")
	clusterInsecure := fs.Bool("cluster-insecure", false, "plain TCP between the members on a raft-listen address other hosts reach")
	removeDeadAfter := fs.Duration("remove-dead-after", 0, "remove a non-voter silent this long (0: never; default 30s)")
	binlogUser := fs.String("binlog-user", "", "user the proxy reads the backend's binary log as (default: binlog_user, or the first admin user)")
	pluginList := fs.String("plugins", "", "plugins to run, in order, separated by commas (\"none\" for none); default: the plugins section, or "+strings.Join(configs.DefaultPlugins, ","))
	var flagUsers []configs.User
	fs.Var(userList{users: &flagUsers}, "user", "name:password of a user to accept (repeatable)")
	fs.Var(userList{admin: true, users: &flagUsers}, "admin-user", "name:password of an admin user (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, false, nil, loose, err
		}
		return cfg, false, nil, loose, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return cfg, false, nil, loose, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}

	cfg = configs.Default()
	if *configPath != "" {
		if cfg, err = configs.Load(*configPath); err == nil {
			loose = configs.LoosePasswords(*configPath, cfg)
		}
		if err != nil {
			return cfg, *checkOnly, nil, loose, err
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "listen-socket":
			cfg.ListenSocket = *listenSocket
		case "backend":
			cfg.Backend.Addr = *backend
		case "data-dir":
			cfg.DataDir = *dataDir
		case "metrics-listen":
			cfg.MetricsListen = *metricsListen
		case "pprof-listen":
			cfg.PprofListen = *pprofListen
		case "log-level":
			cfg.Log.Level = *logLevel
		case "memory-limit":
			n, perr := configs.ParseByteSize(*memoryLimit)
			if perr != nil {
				flagErr = fmt.Errorf("--memory-limit: %q: want a size like 1GB", *memoryLimit)
			}
			cfg.MemoryLimit = configs.ByteSize(n)
		case "node-id":
			cfg.Cluster.NodeID = *nodeID
		case "raft-listen":
			cfg.Cluster.RaftListen = *raftListen
		case "join":
			cfg.Cluster.Join = *join
		case "raft-nonvoter":
			cfg.Cluster.NonVoter = *nonVoter
		case "cluster-cert":
			cfg.Cluster.TLS.Cert = *clusterCert
		case "cluster-key":
			cfg.Cluster.TLS.Key = *clusterKey
		case "cluster-ca":
			cfg.Cluster.TLS.CA = *clusterCA
		case "cluster-insecure":
			cfg.Cluster.TLS.Insecure = *clusterInsecure
		case "remove-dead-after":
			cfg.Cluster.RemoveDeadAfter = *removeDeadAfter
		case "binlog-user":
			cfg.BinlogUser = *binlogUser
		}
	})
	if flagErr != nil {
		return cfg, false, nil, loose, flagErr
	}
	cfg.Users = mergeUsers(cfg.Users, flagUsers)
	switch {
	case flagSet(fs, "plugins"):
		cfg.SelectPlugins(configs.ParsePluginList(*pluginList))
	case cfg.Plugins == nil: // no plugins section: the product's features
		cfg.SelectPlugins(configs.DefaultPlugins)
	}
	deprecated = cfg.ResolveBinlogUser()
	if err := cfg.Validate(); err != nil {
		return cfg, *checkOnly, deprecated, loose, err
	}
	if err := checkCluster(cfg); err != nil {
		return cfg, *checkOnly, deprecated, loose, err
	}
	return cfg, *checkOnly, deprecated, loose, nil
}

func serve(args []string) error {
	cfg, check, deprecated, loose, err := serveConfig("serve", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if check {
		return checkResult(cfg, err)
	}
	if err != nil {
		return err
	}

	level := new(slog.LevelVar)
	level.Set(levelOf(cfg.Log.Level))
	log := newLogger(cfg.Log, level)
	slog.SetDefault(log)
	if loose != "" {
		log.Warn("config: " + loose)
	}
	if len(deprecated) > 0 {
		log.Warn("the plugin option binlog_user is deprecated: set binlog_user at the top level (or --binlog-user)",
			"plugins", strings.Join(deprecated, ","), "binlog_user", cfg.BinlogUser)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if err := lockDataDir(cfg.DataDir); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node, err := startCluster(cfg, log)
	if err != nil {
		return err
	}
	defer node.Close()
	reg.MustRegister(node.node.Metrics()...)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_build_info",
		Help:        "1, labelled with the proxy's version and the Go release it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version()}}, func() float64 { return 1 }))
	pcfg, cert, err := proxyConfig(cfg, log)
	if err != nil {
		return err
	}
	pcfg.Transactions = proxy.NewTransactions()
	// SIGHUP and ADMIN RELOAD CONFIG re-read the configuration from now on
	// (see reloader).
	reload := &reloader{args: args, log: log, level: level, users: pcfg.Accounts, logins: pcfg.Backend.Logins,
		cert: cert, running: cfg}
	reload.watch()
	connector := proxy.NewConnector(pcfg)
	// One reader of the binary log for the whole proxy, which the plugins
	// subscribe to; closed after them.
	follower := binlog.New(connector, cfg.BinlogUser, log)
	defer follower.Close()
	reg.MustRegister(binlogMetrics(follower)...)
	env := plugins.Env{Logger: log, Metrics: reg, DataDir: cfg.DataDir, Backend: connector, Binlog: follower,
		Transactions: pcfg.Transactions}
	chain, built, err := buildChain(cfg, env, node)
	if err != nil {
		return err
	}
	chain = plugins.NewChain(append([]plugins.Plugin{reloadAdmin{reload}}, chain.Plugins()...)...)
	defer chain.Close()
	// Within memory_limit: the caches are shed before the process grows.
	mem := &memlimit.Watcher{Limit: int64(cfg.MemoryLimit), Shed: chain.Shed, Log: log}
	memCtx, stopMem := context.WithCancel(context.Background())
	defer stopMem()
	mem.Start(memCtx)
	reg.MustRegister(mem.Metrics()...)

	pcfg.OutOfMemory = mem.Over
	srv, err := proxy.New(pcfg, chain)
	if err != nil {
		return err
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_backend_pool_idle",
		Help: "Backend connections idle in the pool, logged in, for the next session."}, func() float64 { return float64(srv.PoolIdle()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_sessions",
			Help: "Client sessions open (each holds a backend connection while it runs a statement or a transaction)."},
			func() float64 { return float64(srv.ActiveSessions()) }))
	// Metrics first: nothing after Listen may fail and leave the client
	// listeners (and the socket file) open behind a returned error.
	if cfg.MetricsListen != "" {
		probes := &health{backend: cfg.Backend.Addr, node: node, cache: built.cache}
		stop, err := serveMetrics(cfg.MetricsListen, reg, probes, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.PprofListen != "" {
		stop, err := servePprof(cfg.PprofListen, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := srv.Listen(); err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	names := make([]string, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
		names[i] = p.Name
	}
	where := []any{"listen", srv.Addr().String()}
	if a := srv.SocketAddr(); a != nil {
		where = append(where, "socket", a.String())
	}
	log.Info("tableproxy serving", append(where, "backend", cfg.Backend.Addr,
		"users", len(cfg.Users), "plugins", strings.Join(names, ","), "version", version)...)
	go reportFeatures(log, cfg, env.Backend, follower)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "sessions", srv.ActiveSessions(), "timeout", cfg.ShutdownTimeout)
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Warn("shutdown", "err", err)
	}
	log.Info("stopped")
	return nil
}

// builtPlugins are the plugins of other packages that the chain holds,
// nil where the configuration left one out: the virtual schema and the
// plugins that know of each other are wired from them.
type builtPlugins struct {
	cache  *cache.Plugin
	ddl    *ddloffload.Plugin
	digest *digest.Plugin
}

// buildChain builds the plugin chain: the cluster's admin SQL, then the
// configured plugins in their order, with the virtual schema's answerer
// in front of all of them, whatever plugins are on.
func buildChain(cfg configs.Config, env plugins.Env, node *clusterNode) (*plugins.Chain, builtPlugins, error) {
	var built builtPlugins
	factories := chainFactories(node, cfg.BinlogUser, &built)
	// The config's plugins, numbered as in the config in their errors;
	// the cluster's admin SQL goes first, whatever the config says.
	var specs []plugins.Spec
	for _, p := range cfg.Plugins {
		specs = append(specs, plugins.Spec{Name: p.Name, Options: p.Options})
	}
	chain, err := plugins.Build(specs, env, factories)
	if err != nil {
		return nil, built, err
	}
	if cp, dp := built.cache, built.ddl; cp != nil && dp != nil {
		// A cached table keeps its copy through an ADD INDEX job's swap,
		// on every member: the leader's watcher is the one that matters.
		dp.SetSwapHook(announceSwap(cp, node.node, env.Logger))
		node.node.SetSwapHandler(func(rename string, withdraw bool) {
			if withdraw {
				cp.WithdrawSwap(rename)
			} else {
				cp.ExpectSwap(rename)
			}
		})
	}
	if cp, gp := built.cache, built.digest; cp != nil && gp != nil {
		// The digests say where the cache answered, and the advisor plans
		// with the cache's planner.
		gp.SetCache(cp, cache.Name)
	}
	vs := virtualSchema(node, built)
	return plugins.NewChain(append([]plugins.Plugin{vs, cluster.NewAdmin(node.node)}, chain.Plugins()...)...), built, nil
}

// chainFactories are the plugins a chain may name: the built-in ones, the
// cluster's admin SQL, the cache and the DDL jobs, which record what they
// built in built.
func chainFactories(node *clusterNode, binlogUser string, built *builtPlugins) plugins.Factories {
	factories := plugins.Builtins()
	factories.Add(cluster.AdminName, func(plugins.Options, plugins.Env) (plugins.Plugin, error) {
		return cluster.NewAdmin(node.node), nil
	})
	factories.Add(cache.Name, func(o plugins.Options, env plugins.Env) (plugins.Plugin, error) {
		p, err := cache.Open(o, env, node.cache())
		if err != nil {
			return nil, err
		}
		built.cache = p
		return p, nil
	})
	factories.Add(ddloffload.Name, func(o plugins.Options, env plugins.Env) (plugins.Plugin, error) {
		p, err := ddloffload.Open(o, env)
		if err != nil {
			return nil, err
		}
		built.ddl = p
		return p, nil
	})
	factories.Add(digest.Name, func(o plugins.Options, env plugins.Env) (plugins.Plugin, error) {
		p, err := digest.Open(o, env, node.node.ID(), binlogUser)
		if err != nil {
			return nil, err
		}
		built.digest = p
		return p, nil
	})
	return factories
}

// virtualSchema is the tableproxy schema with the tables of the plugins
// that are on.
func virtualSchema(node *clusterNode, built builtPlugins) *vschema.Schema {
	vs := vschema.New()
	// Each user sees what the backend would show them (vschema.Visibility).
	vs.AddVisible("cluster_members", cluster.NewMembersTable(node.node), vschema.Visibility{Admin: []string{"address"}})
	if cp := built.cache; cp != nil {
		vs.AddVisible("cached_tables", cp.CachedTables(), vschema.Visibility{Schema: "schema_name", Table: "table_name"})
		vs.AddSession("last_statement", cp.LastStatement())
	}
	if dp := built.ddl; dp != nil {
		vs.AddVisible("ddl_jobs", dp.JobsTable(), vschema.Visibility{Schema: "db_name", Table: "table_name", Process: []string{"blocked_by"}})
	}
	if gp := built.digest; gp != nil {
		vs.AddVisible("query_digests", gp.Digests(), vschema.Visibility{Owner: "user"})
		vs.AddVisible("cache_candidates", gp.Candidates(), vschema.Visibility{Schema: "table_schema", Table: "table_name"})
	}
	return vs
}

// flagSet reports whether the command line gave the named flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// mergeUsers lets a flag user replace a file user of the same name.
func mergeUsers(file, flags []configs.User) []configs.User {
	// A flag's user takes the place of the file's of that name; any other
	// name given twice (in the file, or in flags) stays twice, for
	// Validate to refuse, naming it.
	fromFlags := map[string]bool{}
	for _, u := range flags {
		fromFlags[u.Name] = true
	}
	out := make([]configs.User, 0, len(file)+len(flags))
	for _, u := range file {
		if !fromFlags[u.Name] {
			out = append(out, u)
		}
	}
	return append(out, flags...)
}

// proxyConfig is the proxy's configuration from cfg, and the reference to
// the clients' TLS certificate it serves (nil without TLS), which a reload
// replaces.
func proxyConfig(cfg configs.Config, log *slog.Logger) (pc proxy.Config, current *atomic.Pointer[tls.Certificate], err error) {
	users := proxyUsers(cfg)
	pc = proxy.Config{
		Listen:       cfg.Listen,
		ListenSocket: cfg.ListenSocket,
		Backend: proxy.BackendConfig{
			Addr:           cfg.Backend.Addr,
			ConnectTimeout: cfg.Backend.ConnectTimeout,
			MaxIdle:        cfg.Backend.PoolMaxIdle,
			IdleTimeout:    cfg.Backend.PoolIdleTimeout,
			Logins:         &proxy.Logins{}, // shared by the pool and the plugins' Connector
		},
		Users:           users,
		Accounts:        proxy.NewUsers(users),
		AuthPlugin:      cfg.AuthPlugin,
		MaxConnections:  cfg.MaxConnections,
		MaxPacketSize:   int(cfg.MaxPacketSize),
		ShutdownTimeout: cfg.ShutdownTimeout,
		LoginTimeout:    cfg.LoginTimeout,
		RequireTLS:      cfg.TLS.Require,
		Logger:          log,
	}
	if cfg.Backend.PoolMaxIdle == 0 {
		pc.Backend.MaxIdle = -1
	}
	if cfg.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
		if err != nil {
			return pc, nil, fmt.Errorf("tls.cert: %w", err)
		}
		// Through a reference a reload replaces.
		current = new(atomic.Pointer[tls.Certificate])
		current.Store(&cert)
		pc.ClientTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return current.Load(), nil
		}}
	}
	if bt := cfg.Backend.TLS; bt.Enabled {
		host, _, _ := net.SplitHostPort(cfg.Backend.Addr)
		tc := &tls.Config{ServerName: host, InsecureSkipVerify: bt.SkipVerify, MinVersion: tls.VersionTLS12}
		if bt.ServerName != "" {
			tc.ServerName = bt.ServerName
		}
		if bt.CA != "" {
			pem, err := os.ReadFile(bt.CA)
			if err != nil {
				return pc, nil, fmt.Errorf("backend.tls.ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return pc, nil, fmt.Errorf("backend.tls.ca: no certificates in %s", bt.CA)
			}
			tc.RootCAs = pool
		}
		if bt.Cert != "" {
			cert, err := tls.LoadX509KeyPair(bt.Cert, bt.Key)
			if err != nil {
				return pc, nil, fmt.Errorf("backend.tls.cert: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		pc.Backend.TLS = tc
	}
	return pc, current, nil
}

// newLogger is the process's logger, at level (which a reload sets).
// A warning repeated within a second is held back, and counted on the
// next one written; no line below ERROR carries a stack trace (see
// lograte.Handler).
func newLogger(c configs.Log, level *slog.LevelVar) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(lograte.NewHandler(h, time.Second))
}

// serveMetrics serves Prometheus metrics, and the health probes.
func serveMetrics(addr string, reg *prometheus.Registry, probes *health, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	probes.routes(mux)
	return serveHTTP("metrics_listen", addr, mux, log)
}

// servePprof serves Go's profiles, on a listener of their own (an operator
// asks for it, on loopback by default). Never the command line
// (/debug/pprof/cmdline): it may hold passwords.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/cmdline") {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveHTTP("pprof_listen", addr, mux, log)
}

// serveHTTP serves mux on addr until the returned stop is called.
func serveHTTP(option, addr string, mux *http.ServeMux, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "option", option, "err", err)
		}
	}()
	return func() { _ = hs.Close() }, nil
}

// announceSwap is the ddloffload plugin's SwapHook: the swap announced to
// this proxy's cache and to every other member's, and withdrawn from all
// when the job cancels it.
func announceSwap(cp *cache.Plugin, n *cluster.Node, log *slog.Logger) ddloffload.SwapHook {
	return func(rename string) (cancel func()) {
		local := cp.ExpectSwap(rename)
		if missed := n.AnnounceSwap(context.Background(), rename, false); len(missed) > 0 {
			log.Warn("ddl: swap not announced to every member; those reload the table after it", "members", missed)
		}
		return func() {
			local()
			n.AnnounceSwap(context.Background(), rename, true)
		}
	}
}

// binlogMetrics are the binary-log follower's: events read, the newest
// event's time on the backend, how long after it was written it was
// received here, and the stream's offset in its log file.
func binlogMetrics(f *binlog.Follower) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_binlog_events_total",
			Help: "Binary-log events the proxy's follower has read."}, func() float64 { return float64(f.Stats().Events) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_binlog_last_event_timestamp_seconds",
			Help: "The time, on the backend, of the newest binary-log event read (0: none yet)."}, func() float64 {
			if t := f.Stats().LastEventTime; !t.IsZero() {
				return float64(t.Unix())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_binlog_delay_seconds",
			Help: "How long after the backend wrote the newest event read the follower received it (whole seconds, as the log records time)."}, func() float64 {
			st := f.Stats()
			if st.LastEventTime.IsZero() {
				return 0
			}
			return max(0, st.ReceivedAt.Sub(st.LastEventTime).Seconds())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_binlog_position_offset",
			Help: "The follower's offset in its current binary-log file."}, func() float64 { return float64(f.Stats().Offset) }),
	}
}
