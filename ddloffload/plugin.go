package ddloffload

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/binlog"
	"tableproxy/configs"
	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// Name is the plugin's name in the config.
const Name = "ddloffload"

// Options are the plugin's settings.
type Options struct {
	// Workers copy key ranges in parallel (default 4).
	Workers int `json:"workers"`
	// ChunkRows is how many rows one copy statement moves (default 5000).
	ChunkRows int `json:"chunk_rows"`
	// BinlogUser is deprecated: the proxy's top-level binlog_user names
	// the one user the binary log is read as, and takes this when it is
	// not set (see configs.ResolveBinlogUser).
	BinlogUser string `json:"binlog_user"`
	// OldTableRetention is how long the original table is kept after the
	// swap, under a name of its job's (see shadowNames), so that a bad
	// index can be backed out by renaming it back (default 24h; 0 drops it
	// at once). ADMIN DROP DDL KEPT TABLES drops them sooner.
	OldTableRetention *plugins.Duration `json:"old_table_retention"`
	// CutOverHold bounds how long statements on the table are held at the
	// proxy during the swap (default 5s); past it the attempt is abandoned
	// and retried.
	CutOverHold plugins.Duration `json:"cutover_hold"`
	// CutOverAttempts is how many times the swap is tried (default 10),
	// with a wait that doubles from 0.5 s to 30 s between attempts.
	CutOverAttempts int `json:"cutover_attempts"`
	// CutOverKillBlockers, when above 0, has the job kill the sessions that
	// held up the swap once that many attempts have failed: those seen
	// holding a metadata lock on the table (which needs MariaDB's
	// metadata_lock_info plugin or MySQL's performance_schema; a session
	// only seen with a transaction open is never killed). Default 0: off.
	CutOverKillBlockers int `json:"cutover_kill_blockers"`
	// PostponeCutOver is tableproxy_ddl_postpone_cutover's default: jobs
	// wait, ready to cut over, for ADMIN COMPLETE DDL JOBS (default off).
	PostponeCutOver bool `json:"postpone_cutover"`
	// LockWaitTimeout is the lock_wait_timeout of the job's table locks, so
	// a long transaction on the table makes the job wait and retry instead
	// of forming a metadata-lock queue (default 2s).
	LockWaitTimeout plugins.Duration `json:"lock_wait_timeout"`
	// KeepJobs is how many past jobs ADMIN SHOW DDL JOBS lists (default 100).
	KeepJobs int `json:"keep_jobs"`
	// KeptTablesSchema is the schema kept originals are moved to, out of
	// the application's sight (SHOW TABLES, an ORM's introspection,
	// mysqldump of its schema); default tableproxy_kept. Where the move
	// is refused (privileges, triggers), or with "-", an original stays
	// beside its table.
	KeptTablesSchema string `json:"kept_tables_schema"`
	// KeptTablesMaxBytes bounds the kept originals' size on the backend
	// together (default 1GB; 0: no bound): past it the oldest are dropped
	// first, retention or not.
	KeptTablesMaxBytes *configs.ByteSize `json:"kept_tables_max_bytes"`

	// The defaults of the tableproxy_ddl_* variables (see vars.go) that
	// have no option above.

	// CopyMethod is insert_select (default) or read_ahead.
	CopyMethod string `json:"copy_method"`
	// Strategy is auto (default: see strategy.go), backfill or native.
	Strategy string `json:"strategy"`
	// NativeBelow is the size of a table's rows under which the auto
	// strategy lets the backend build the index (default 16MB; 0: never
	// for its size alone).
	NativeBelow *string `json:"native_below"`
	// NativeRetries is how many times the native strategy tries its ALTER
	// when it cannot get its metadata lock in time (default 10).
	NativeRetries int `json:"native_retries"`
	// SortMemory bounds the memory of a UNIQUE index's sort (default 64MB).
	SortMemory string `json:"sort_memory"`
	// TempDir is where sorted runs spill (default <data_dir>/ddl-tmp).
	TempDir string `json:"temp_dir"`
	// DiskQuota bounds the temp dir's use by all jobs (default 100GB).
	DiskQuota string `json:"disk_quota"`
	// MaxThreadsRunning pauses the copy while the backend's
	// Threads_running is above it (default 0: off).
	MaxThreadsRunning int `json:"max_threads_running"`
	// MaxLatencyPct pauses the copy while the foreground's p99 latency, as
	// the proxy sees it, is above this percent of its p99 before the copy
	// (default 150; 0: off).
	MaxLatencyPct *int `json:"max_latency_pct"`
	// MaxReplicaLag pauses the copy while a replica in Replicas lags by
	// more seconds than this, or does not replicate (default 0: off).
	MaxReplicaLag int `json:"max_replica_lag"`
	// Replicas are the backend's replicas whose lag the throttle reads, as
	// user:password@host:port (the user needs REPLICATION CLIENT, or
	// SLAVE MONITOR on MariaDB 10.5 and later).
	Replicas []string `json:"replicas"`
	// ReplicaTimeout is how long a replica may be unreachable before the
	// copy stops waiting for it (default 30s; it is waited for again if it
	// comes back).
	ReplicaTimeout plugins.Duration `json:"replica_timeout"`

	sortMemory, diskQuota, nativeBelow, keptMaxBytes int64
}

func (o *Options) setDefaults(dataDir string) error {
	if o.CopyMethod == "" {
		o.CopyMethod = CopyInsertSelect
	}
	if o.Strategy == "" {
		o.Strategy = StrategyAuto
	}
	if o.NativeBelow == nil {
		def := "16MB"
		o.NativeBelow = &def
	}
	if o.NativeRetries <= 0 {
		o.NativeRetries = 10
	}
	if o.SortMemory == "" {
		o.SortMemory = "64MB"
	}
	if o.DiskQuota == "" {
		o.DiskQuota = "100GB"
	}
	if o.TempDir == "" {
		o.TempDir = filepath.Join(dataDir, "ddl-tmp")
	}
	if abs, err := filepath.Abs(o.TempDir); err == nil {
		o.TempDir = abs
	}
	var err error
	if o.nativeBelow, err = configs.ParseByteSize(*o.NativeBelow); err != nil {
		return fmt.Errorf("native_below: %w", err)
	}
	if o.sortMemory, err = configs.ParseByteSize(o.SortMemory); err != nil {
		return fmt.Errorf("sort_memory: %w", err)
	}
	if o.diskQuota, err = configs.ParseByteSize(o.DiskQuota); err != nil {
		return fmt.Errorf("disk_quota: %w", err)
	}
	if o.KeptTablesMaxBytes == nil {
		def := configs.ByteSize(1 << 30)
		o.KeptTablesMaxBytes = &def
	}
	o.keptMaxBytes = int64(*o.KeptTablesMaxBytes)
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.ChunkRows <= 0 {
		o.ChunkRows = 5000
	}
	if o.OldTableRetention == nil {
		d := plugins.Duration(24 * time.Hour)
		o.OldTableRetention = &d
	}
	if o.CutOverHold <= 0 {
		o.CutOverHold = plugins.Duration(5 * time.Second)
	}
	if o.ReplicaTimeout <= 0 {
		o.ReplicaTimeout = plugins.Duration(30 * time.Second)
	}
	if o.CutOverAttempts <= 0 {
		o.CutOverAttempts = 10
	}
	if o.LockWaitTimeout <= 0 {
		o.LockWaitTimeout = plugins.Duration(2 * time.Second)
	}
	if o.KeepJobs <= 0 {
		o.KeepJobs = 100
	}
	if o.KeptTablesSchema == "" {
		o.KeptTablesSchema = "tableproxy_kept"
	}
	if o.MaxLatencyPct == nil {
		pct := defaultMaxLatencyPct
		o.MaxLatencyPct = &pct
	}
	// The options are the variables' initial global values: check them as
	// SET GLOBAL would.
	for name, v := range map[string]any{"workers": int64(o.Workers), "batch_size": int64(o.ChunkRows), "copy_method": o.CopyMethod,
		"strategy": o.Strategy, "native_retries": int64(o.NativeRetries), "sort_memory": o.sortMemory, "disk_quota": o.diskQuota,
		"max_threads_running": int64(o.MaxThreadsRunning), "max_replica_lag": int64(o.MaxReplicaLag),
		"max_latency_pct": int64(*o.MaxLatencyPct)} {
		d, _ := lookupVar(varPrefix + name)
		if _, me := d.normalize(v); me != nil {
			return fmt.Errorf("%s: %s", name, me.Message)
		}
	}
	for _, r := range o.Replicas {
		if _, err := parseReplica(r); err != nil {
			return fmt.Errorf("replicas: %w", err)
		}
	}
	return nil
}

// SwapHook is told the RENAME TABLE that swaps a job's verified shadow in
// (exactly as the job will send it) before it is sent: the cache keeps a
// cached copy of the table through it, as the rows are the same. cancel
// withdraws it when the RENAME was not sent or failed. The command wires
// the cache's ExpectSwap when both plugins are on.
type SwapHook func(rename string) (cancel func())

// Plugin runs ADD INDEX jobs.
type Plugin struct {
	log     *slog.Logger
	backend plugins.Backend
	binlog  *binlog.Follower
	opts    Options
	jobs    *registry
	fence   fence
	fg      *latencies // the foreground's statement latency, for the throttle
	fgTx    *latencies // the foreground's transaction latency, likewise (see unitEnded)
	swapped SwapHook
	// buildRate is the bytes of table a second the backend's last index
	// build here went through (native ALTER or the shadow's build), for
	// the auto strategy's estimate of a native ALTER's replica lag.
	buildRate atomic.Int64

	vars *vars

	running atomic.Int32 // jobs running; DDL is checked against them only then

	stall   stallPoint // the fault tests' hook (see stallEnv)
	stallOn bool
	// checkpointEvery is how often a copy saves its watermark
	// (checkpointEvery, or the fault tests' checkpointEnv).
	checkpointEvery time.Duration

	janitorWake chan struct{} // a kept table's drop time was set (see janitor)

	ctx    context.Context // cancelled by Close: running jobs stop, kept for a resume
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// CheckOptions checks the plugin's options as Open does, without opening
// it (tableproxy check-config); the temp dir's default, under the data
// dir, is not checked.
func CheckOptions(raw plugins.Options) error {
	var opts Options
	if err := decodeOptions(raw, &opts); err != nil {
		return err
	}
	return opts.setDefaults(".")
}

// decodeOptions decodes raw into opts, refusing a count set to 0 or less
// that would otherwise quietly become its default (workers: 0 became 4).
func decodeOptions(raw plugins.Options, opts *Options) error {
	if err := plugins.DecodeOptions(raw, opts); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"workers", opts.Workers}, {"chunk_rows", opts.ChunkRows}, {"cutover_attempts", opts.CutOverAttempts}, {"keep_jobs", opts.KeepJobs}} {
		if _, set := raw[c.name]; set && c.v <= 0 {
			return fmt.Errorf("%s: %d: must be at least 1 (leave it out for its default)", c.name, c.v)
		}
	}
	return nil
}

// Open builds the plugin from its options.
func Open(raw plugins.Options, env plugins.Env) (*Plugin, error) {
	var opts Options
	if err := decodeOptions(raw, &opts); err != nil {
		return nil, err
	}
	if env.Backend == nil {
		return nil, fmt.Errorf("needs a backend connector")
	}
	if env.Binlog == nil {
		return nil, fmt.Errorf("needs the binary log follower")
	}
	if env.DataDir == "" {
		return nil, fmt.Errorf("needs a data directory")
	}
	if env.Transactions == nil {
		return nil, fmt.Errorf("needs the proxy's account of transactions")
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	p, err := New(log, env.Backend, env.Binlog, env.Transactions, env.DataDir, opts)
	if err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		p.registerMetrics(env.Metrics)
	}
	return p, nil
}

// New builds the plugin with its job registry in dataDir; its cut-overs
// wait for the transactions txs lists. Jobs that were running when the
// proxy stopped are settled in the background: resumed from their
// checkpoints, or rolled back (see resume.go).
func New(log *slog.Logger, backend plugins.Backend, follower *binlog.Follower, txs plugins.Transactions, dataDir string, opts Options) (*Plugin, error) {
	if err := opts.setDefaults(dataDir); err != nil {
		return nil, err
	}
	reg, err := openRegistry(dataDir, opts.KeepJobs)
	if err != nil {
		return nil, err
	}
	p := &Plugin{log: log, backend: backend, binlog: follower, opts: opts, jobs: reg, vars: newVars(opts), fg: newLatencies(), fgTx: newLatencies(),
		janitorWake: make(chan struct{}, 1)}
	p.fence.txs = txs
	p.stall, p.stallOn = stallFromEnv()
	p.checkpointEvery = checkpointEveryFromEnv()
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.recover()
	p.wg.Add(1)
	go p.janitor()
	return p, nil
}

// SetSwapHook installs the hook told of each swap.
func (p *Plugin) SetSwapHook(f SwapHook) { p.swapped = f }

// announceSwap tells the swap hook, if any, of rename.
func (p *Plugin) announceSwap(rename string) (cancel func()) {
	if p.swapped == nil {
		return func() {}
	}
	return p.swapped(rename)
}

// Name implements plugins.Plugin.
func (p *Plugin) Name() string { return Name }

// Close stops running jobs and waits for them; they stay running in the
// jobs file, with their shadows and checkpoints, and the next start
// resumes them (see resume.go).
// Drain implements plugins.Drainer: running jobs stop where they are,
// kept for the next start to resume, and their clients get 1053 (server
// shutdown) at once instead of holding the proxy's shutdown up.
func (p *Plugin) Drain() { p.cancel() }

func (p *Plugin) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// OnResult records the latency of a client's statement the backend ran,
// and of its unit of work when the statement ends one. The jobs' own
// statements use connections of their own and are not seen; those the
// plugins answer (the ALTER a job runs for, this plugin's admin
// statements) are left out of the latencies.
func (p *Plugin) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	if out.Source == plugins.FromBackend {
		p.fg.record(out.Duration)
	}
	u := unitOf(st)
	if !st.InTx {
		// The statement began a unit (a transaction, if it is BEGIN or
		// autocommit is off; else the statement alone) when it arrived,
		// whoever answered it.
		u.start = p.fgTx.now().Add(-out.Duration)
	}
	if out.Status&mysql.SERVER_STATUS_IN_TRANS == 0 {
		p.unitEnded(u, out)
	}
}

// unit is a session's unit of work: its transaction, or its statement
// outside one. start is when it began, zero between units.
type unit struct{ start time.Time }

// unitKey is the key of a session's *unit in its state.
type unitKey struct{}

func unitOf(st *plugins.Statement) *unit {
	if u, ok := st.Session.Get(unitKey{}).(*unit); ok {
		return u
	}
	u := &unit{}
	if st.Session != nil {
		st.Session.Set(unitKey{}, u)
	}
	return u
}

// unitEnded records how long the session's unit of work took, from its
// first statement's arrival to its last one's answer: what an application
// waits for, a transaction's statements, the time between them and any
// hold of the cut-over included. A statement's own latency barely moves
// when the backend's CPUs are shared with a copy (each is slowed a little);
// a transaction's, the sum of a dozen or more such, shows it, and it is
// what clients see (sysbench's latency is the transaction's). Units that
// the backend did not end (a plugin answered: this plugin's ALTER, which
// waits for its job, or the cache's reads) are left out.
func (p *Plugin) unitEnded(u *unit, out *plugins.Outcome) {
	start := u.start
	u.start = time.Time{}
	if start.IsZero() || out.Source != plugins.FromBackend {
		return
	}
	p.fgTx.record(p.fgTx.now().Sub(start))
}

// OnStatement implements plugins.StatementFilter.
func (p *Plugin) OnStatement(st *plugins.Statement) plugins.Action {
	if p.fence.active() {
		p.fence.wait(st, 2*time.Duration(p.opts.CutOverHold))
	}
	switch st.Kind {
	case plugins.KindSelect:
		// Every SELECT passes here: only those with a system variable
		// (a fast search) are looked at further.
		if strings.Contains(st.SQL, "@@") {
			if a, ok := p.onVars(st); ok {
				return a
			}
		}
	case plugins.KindSet, plugins.KindShow:
		if a, ok := p.onVars(st); ok {
			return a
		}
	case plugins.KindMulti, plugins.KindCompound, plugins.KindOther:
		// DDL may be any statement of these (SET @a = 1; ALTER TABLE ...,
		// SET STATEMENT ... FOR ALTER TABLE ...).
		if p.running.Load() > 0 {
			if a, _ := st.Analysis(); a.Effect == plugins.EffectDDL {
				if a, busy := p.refuseBusy(st); busy {
					return a
				}
			}
		}
	case plugins.KindDDL:
		if p.running.Load() > 0 {
			if a, busy := p.refuseBusy(st); busy {
				return a
			}
		}
		if st.Command != plugins.ComQuery {
			return plugins.Continue
		}
		if !mayAddIndex(st.SQL) {
			return plugins.Continue
		}
		stmts, err := st.Parsed()
		req, ok := parseRequest(stmts, err, st.DB)
		if !ok {
			return plugins.Continue
		}
		if req.Schema == "" {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_NO_DB_ERROR, "No database selected"))
		}
		if !sessionSeesBaseTable(st, req) {
			return plugins.Continue
		}
		user, db, query, set := st.User, strings.Clone(st.DB), strings.Clone(st.SQL), p.vars.settings(st)
		if set.PostponeCutOver && set.Strategy == StrategyNative {
			return plugins.RefuseWith(errUnsupported("a postponed cut-over with the native strategy (its ALTER cannot wait, ready, for the word): use strategy auto or backfill"))
		}
		if p.vars.async(st) {
			return p.startDetached(user, db, query, req, set)
		}
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			// DDL ends the session's transaction (sessionSeesBaseTable
			// committed it), whatever the job's outcome: the answer says so.
			w.SetStatus(w.Status() &^ mysql.SERVER_STATUS_IN_TRANS)
			var report func(Job)
			if pw, ok := w.(plugins.ProgressWriter); ok && pw.ReportsProgress() {
				report = func(j Job) {
					stage, maxStage, percent, info := j.progressReport()
					_ = pw.Progress(stage, maxStage, percent, info) // a client gone sees the end anyway
				}
			}
			if err := p.runJob(user, db, query, req, set, report); err != nil {
				return w.WriteError(err)
			}
			return w.WriteResult(nil)
		}))
	case plugins.KindAdmin:
		if st.Command != plugins.ComQuery {
			return plugins.Continue
		}
		return p.admin(st)
	}
	return plugins.Continue
}

// refuseBusy refuses DDL on a table while a job adds an index to it: the
// job would fail on seeing it. The client gets the error a DDL waiting
// for the table's metadata lock would get. A new ADD INDEX on the table
// is left to the registry, which names the job.
func (p *Plugin) refuseBusy(st *plugins.Statement) (plugins.Action, bool) {
	stmts, err := st.Parsed()
	if _, isAdd := parseRequest(stmts, err, st.DB); isAdd {
		return plugins.Continue, false
	}
	a, _ := st.Analysis()
	if a.Unparsed {
		return plugins.Continue, false
	}
	for _, t := range a.Named {
		if id, busy := p.jobs.runningOn(t.Schema, t.Table); busy {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_LOCK_WAIT_TIMEOUT, fmt.Sprintf(
				"Lock wait timeout exceeded; tableproxy DDL job %d is adding an index to %s: try again when it ends (ADMIN SHOW DDL JOBS)", id, mysqlwire.QuoteTable(t.Schema, t.Table)))), true
		}
	}
	return plugins.Continue, false
}

// sessionSeesBaseTable asks the session's own connection what the name
// means there, and commits its open transaction as DDL does in MySQL. A
// temporary table (private to the session, and shadowing any table of the
// same name), a view, or a table the session cannot see is left to the
// backend, which gives its own answer or error.
func sessionSeesBaseTable(st *plugins.Statement, req *Request) bool {
	if st.Backend == nil {
		return true
	}
	if st.InTx {
		if _, err := st.Backend.Query("COMMIT"); err != nil {
			return false
		}
	}
	r, err := st.Backend.Query("SHOW CREATE TABLE " + mysqlwire.QuoteTable(req.Schema, req.Table))
	if err != nil || r.Resultset == nil || r.RowNumber() == 0 || len(r.Fields) != 2 {
		return false
	}
	ddl, _ := r.GetString(0, 1)
	return strings.HasPrefix(ddl, "CREATE TABLE")
}

// mayAddIndex is a cheap test that spares the parser most DDL.
func mayAddIndex(sql string) bool {
	return containsFold(sql, "INDEX") || containsFold(sql, "KEY") || containsFold(sql, "UNIQUE")
}

func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}
