// Package ddloffload owns online ADD INDEX: it intercepts ALTER TABLE ...
// ADD INDEX and CREATE INDEX on the plugin chain and runs each as a job of
// explicit stages (preflight, shadow, binlog, backfill, catch-up, build,
// verify, cut-over, cleanup) against the backend, while the application
// keeps reading and writing the table. The client that sent the statement
// waits for the job, as it would for native DDL, and gets OK or the error
// MySQL would give; other sessions watch jobs with ADMIN SHOW DDL JOBS.
//
// What can go wrong, and what stops it: a row changed while it is copied
// (every change after the job's starting binary-log position marks its key
// dirty, and dirty keys are copied again from the table, so the shadow
// converges whatever order copies and changes happened in); a write that
// bypasses the proxy during the swap (the table is read-locked, so writers
// wait and readers go on, while the last changes are applied and the
// RENAME is queued behind that lock); a duplicate for a UNIQUE index (the
// external sort finds it after the copy, and the backend's own index build
// on the shadow any made later, before anything is swapped); DDL on the
// table during the job, or a break in the binary log (the job fails and
// drops its shadow; the original table is never touched until the atomic
// RENAME); a proxy stop, kill -9 included (the job's state and checkpoint
// are in the jobs file, and the next start resumes it).
package ddloffload

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/configs"
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
	// BinlogUser is the proxy user that reads the binary log (it needs the
	// REPLICATION SLAVE and REPLICATION CLIENT privileges on the backend);
	// by default the user who sent the ALTER.
	BinlogUser string `json:"binlog_user"`
	// OldTableRetention is how long the original table is kept, renamed to
	// <table>__old, after the swap (default 24h; 0 drops it at once).
	OldTableRetention *plugins.Duration `json:"old_table_retention"`
	// CutOverHold bounds how long statements on the table are held at the
	// proxy during the swap (default 5s); past it the attempt is abandoned
	// and retried.
	CutOverHold plugins.Duration `json:"cutover_hold"`
	// CutOverAttempts is how many times the swap is tried (default 5).
	CutOverAttempts int `json:"cutover_attempts"`
	// LockWaitTimeout is the lock_wait_timeout of the job's table locks, so
	// a long transaction on the table makes the job wait and retry instead
	// of forming a metadata-lock queue (default 2s).
	LockWaitTimeout plugins.Duration `json:"lock_wait_timeout"`
	// KeepJobs is how many past jobs ADMIN SHOW DDL JOBS lists (default 100).
	KeepJobs int `json:"keep_jobs"`

	// The defaults of the tableproxy_ddl_* variables (see vars.go) that
	// have no option above.

	// CopyMethod is insert_select (default) or read_ahead.
	CopyMethod string `json:"copy_method"`
	// Strategy is backfill (default) or native.
	Strategy string `json:"strategy"`
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

	sortMemory, diskQuota int64
}

func (o *Options) setDefaults(dataDir string) error {
	if o.CopyMethod == "" {
		o.CopyMethod = CopyInsertSelect
	}
	if o.Strategy == "" {
		o.Strategy = StrategyBackfill
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
	if o.sortMemory, err = configs.ParseByteSize(o.SortMemory); err != nil {
		return fmt.Errorf("sort_memory: %w", err)
	}
	if o.diskQuota, err = configs.ParseByteSize(o.DiskQuota); err != nil {
		return fmt.Errorf("disk_quota: %w", err)
	}
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
	if o.CutOverAttempts <= 0 {
		o.CutOverAttempts = 5
	}
	if o.LockWaitTimeout <= 0 {
		o.LockWaitTimeout = plugins.Duration(2 * time.Second)
	}
	if o.KeepJobs <= 0 {
		o.KeepJobs = 100
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

// CachedFunc reports whether a table is cached by the cache plugin; the
// job refuses cached tables, as TiDB does. The command wires it when both
// plugins are enabled (the cache plugin also refuses DDL on cached tables
// when it runs first on the chain).
type CachedFunc func(schema, table string) bool

// Plugin runs ADD INDEX jobs.
type Plugin struct {
	log     *slog.Logger
	backend plugins.Backend
	opts    Options
	jobs    *registry
	fence   fence
	fg      *latencies // the foreground's statement latency, for the throttle
	fgTx    *latencies // the foreground's transaction latency, likewise (see unitEnded)
	cached  CachedFunc

	vars *vars

	parsers sync.Pool
	running atomic.Int32 // jobs running; DDL is checked against them only then

	stall   stallPoint // the fault tests' hook (see stallEnv)
	stallOn bool

	ctx    context.Context // cancelled by Close: running jobs stop, kept for a resume
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Factory builds the plugin; register it with plugins.Register(Name, Factory).
func Factory(raw plugins.Options, env plugins.Env) (plugins.Plugin, error) {
	var opts Options
	if err := plugins.DecodeOptions(raw, &opts); err != nil {
		return nil, err
	}
	if env.Backend == nil {
		return nil, fmt.Errorf("needs a backend connector")
	}
	if env.DataDir == "" {
		return nil, fmt.Errorf("needs a data directory")
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	p, err := New(log, env.Backend, env.DataDir, opts)
	if err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		p.registerMetrics(env.Metrics)
	}
	return p, nil
}

// New builds the plugin with its job registry in dataDir. Jobs that were
// running when the proxy stopped are settled in the background: resumed
// from their checkpoints, or rolled back (see resume.go).
func New(log *slog.Logger, backend plugins.Backend, dataDir string, opts Options) (*Plugin, error) {
	if err := opts.setDefaults(dataDir); err != nil {
		return nil, err
	}
	reg, err := openRegistry(dataDir, opts.KeepJobs)
	if err != nil {
		return nil, err
	}
	p := &Plugin{log: log, backend: backend, opts: opts, jobs: reg, vars: newVars(opts), fg: newLatencies(), fgTx: newLatencies()}
	p.stall, p.stallOn = stallFromEnv()
	p.parsers.New = func() any { return parser.New() }
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.recover()
	p.wg.Add(1)
	go p.janitor()
	return p, nil
}

// SetCachedFunc installs the test for cached tables.
func (p *Plugin) SetCachedFunc(f CachedFunc) { p.cached = f }

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

// OnResult records whether the session is in a transaction now (for the
// cut-over's fence), and the latency of a client's statement the backend
// ran. The jobs' own statements use connections of their own and are not
// seen; those the plugins answer (the ALTER a job runs for, this plugin's
// admin statements) are left out of the latencies.
func (p *Plugin) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	s := p.fence.ended(st, out)
	if out.Source == plugins.FromBackend {
		p.fg.record(out.Duration)
	}
	switch {
	case out.Status&mysql.SERVER_STATUS_IN_TRANS == 0:
		p.unitEnded(s, out)
	case s.unitStart.IsZero():
		// Begun by a statement that a plugin earlier on the chain
		// answered (the cache's BEGIN) before OnStatement saw it.
		s.unitStart = p.fgTx.now()
	}
}

// unitStarting notes when a session's unit of work begins: a statement
// outside a transaction begins one (a transaction, if it is BEGIN or
// autocommit is off; else the statement alone).
func (p *Plugin) unitStarting(s *sessionTx, st *plugins.Statement) {
	if !st.InTx && s.unitStart.IsZero() {
		s.unitStart = p.fgTx.now()
	}
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
func (p *Plugin) unitEnded(s *sessionTx, out *plugins.Outcome) {
	start := s.unitStart
	s.unitStart = time.Time{}
	if start.IsZero() || out.Source != plugins.FromBackend {
		return
	}
	p.fgTx.record(p.fgTx.now().Sub(start))
}

// OnConn implements plugins.ConnObserver: the fence forgets a session that
// ended, or whose state was reset (its transaction ended with it; its next
// statement makes a new record).
func (p *Plugin) OnConn(ev plugins.ConnEvent) {
	if ev.Kind == plugins.ConnClosed || ev.Kind == plugins.ConnReset {
		p.fence.closed(ev.ConnID)
	}
}

// OnStatement implements plugins.StatementFilter.
func (p *Plugin) OnStatement(st *plugins.Statement) plugins.Action {
	p.unitStarting(p.fence.starting(st), st)
	if p.fence.active() {
		p.fence.wait(st, &p.parsers, 2*time.Duration(p.opts.CutOverHold))
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
		pr := p.parsers.Get().(*parser.Parser)
		req, ok := parseRequest(pr, st.SQL, st.DB)
		p.parsers.Put(pr)
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
	pr := p.parsers.Get().(*parser.Parser)
	defer p.parsers.Put(pr)
	if _, isAdd := parseRequest(pr, st.SQL, st.DB); isAdd {
		return plugins.Continue, false
	}
	tables, ok := tablesIn(pr, st.SQL, st.DB)
	if !ok {
		return plugins.Continue, false
	}
	for _, t := range tables {
		if id, busy := p.jobs.runningOn(t.schema, t.table); busy {
			return plugins.RefuseWith(mysql.NewError(mysql.ER_LOCK_WAIT_TIMEOUT, fmt.Sprintf(
				"Lock wait timeout exceeded; tableproxy DDL job %d is adding an index to %s: try again when it ends (ADMIN SHOW DDL JOBS)", id, tableName(t.schema, t.table)))), true
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
	r, err := st.Backend.Query("SHOW CREATE TABLE " + tableName(req.Schema, req.Table))
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

// admin answers ADMIN SHOW DDL JOBS.
func (p *Plugin) admin(st *plugins.Statement) plugins.Action {
	pr := p.parsers.Get().(*parser.Parser)
	defer p.parsers.Put(pr) // the tree is the parser's until its next parse
	stmts, _, err := pr.ParseSQL(st.SQL)
	if err != nil || len(stmts) != 1 {
		return plugins.Continue
	}
	a, ok := stmts[0].(*ast.AdminStmt)
	if !ok {
		return plugins.Continue
	}
	var act func(int64) string
	switch a.Tp {
	case ast.AdminShowDDLJobs:
	case ast.AdminCancelDDLJobs:
		act = p.cancelJob
	case ast.AdminPauseDDLJobs:
		act = p.pauseJob
	case ast.AdminResumeDDLJobs:
		act = p.resumeJob
	default:
		return plugins.Continue
	}
	if !st.Admin {
		return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR,
			"Access denied; you need (at least one of) the tableproxy admin privilege(s) for this operation"))
	}
	if act != nil {
		ids := slices.Clone(a.JobIDs)
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			rows := make([][]any, len(ids))
			for i, id := range ids {
				rows[i] = []any{id, act(id)}
			}
			rs, err := plugins.TextResultset([]string{"JOB_ID", "RESULT"}, rows)
			if err != nil {
				return w.WriteError(errJob("%v", err))
			}
			w.Rows(uint64(len(rows)))
			return w.WriteResult(&mysql.Result{Resultset: rs})
		}))
	}
	limit := a.JobNumber
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		rs, err := jobsResultset(p.jobs.list(), limit)
		if err != nil {
			return w.WriteError(errJob("%v", err))
		}
		w.Rows(uint64(len(rs.Values)))
		return w.WriteResult(&mysql.Result{Resultset: rs})
	}))
}

// cancelJob cancels a running job, as ADMIN CANCEL DDL JOBS reports it
// (TiDB's wording). A job stops at its next check, drops its shadow, and
// its client gets error 1317; a job that has already swapped its table in
// cannot be cancelled.
func (p *Plugin) cancelJob(id int64) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	if msg := func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		switch {
		case rec.job.State != StateRunning || rec.cancel == nil:
			return fmt.Sprintf("error: [ddl:8225]This job:%d is finished, so can't be cancelled", id)
		case rec.swapped != nil && rec.swapped.Load():
			return fmt.Sprintf("error: [ddl:8225]This job:%d has swapped its table in, so can't be cancelled", id)
		case rec.cancelled.Load():
			return fmt.Sprintf("error: [ddl:8226]This job:%d is almost finished, can't be cancelled now", id)
		}
		rec.cancelled.Store(true)
		rec.job.CancelRequested = true
		rec.cancel()
		return ""
	}(); msg != "" {
		return msg
	}
	// Recorded, so that a job the proxy stops before it has rolled back is
	// rolled back at the next start, not resumed.
	p.persist()
	p.log.Info("ddl: job cancelled", "job", id)
	return "successful"
}

// pauseJob pauses a running job at its next check, before its cut-over.
func (p *Plugin) pauseJob(id int64) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	if msg := func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		switch {
		case rec.job.State != StateRunning || rec.cancel == nil:
			return fmt.Sprintf("error: [ddl:8225]This job:%d is finished, so can't be paused", id)
		case Stage(rec.stage.Load()) == StageNative:
			return fmt.Sprintf("error: [ddl:8226]This job:%d runs the backend's own ALTER, can't be paused", id)
		case Stage(rec.stage.Load()) >= StageCutOver:
			return fmt.Sprintf("error: [ddl:8226]This job:%d is swapping its table in, can't be paused now", id)
		}
		rec.gate.pause()
		rec.job.Paused = true
		return ""
	}(); msg != "" {
		return msg
	}
	p.persist()
	p.log.Info("ddl: job paused", "job", id)
	return "successful"
}

// resumeJob resumes a paused job.
func (p *Plugin) resumeJob(id int64) string {
	rec := p.jobs.get(id)
	if rec == nil {
		return fmt.Sprintf("error: [ddl:8223]DDL Job:%d not found", id)
	}
	if !rec.gate.resume() {
		return fmt.Sprintf("error: [ddl:8260]Job %d can't be resumed: it is not paused", id)
	}
	_ = p.jobs.update(rec, func(j *Job) { j.Paused = false })
	p.log.Info("ddl: job resumed", "job", id)
	return "successful"
}

// jobsColumns are ADMIN SHOW DDL JOBS's columns: TiDB's names where TiDB has
// the column.
var jobsColumns = []string{"JOB_ID", "DB_NAME", "TABLE_NAME", "JOB_TYPE", "STATE", "STAGE",
	"ROW_COUNT", "ROWS_ESTIMATED", "RATE", "ETA", "START_TIME", "END_TIME", "QUERY", "ERROR"}

func jobsResultset(jobs []Job, limit int64) (*mysql.Resultset, error) {
	if limit > 0 && int64(len(jobs)) > limit {
		jobs = jobs[:limit]
	}
	rows := make([][]any, 0, len(jobs))
	ts := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.Local().Format("2006-01-02 15:04:05")
	}
	for _, j := range jobs {
		var eta any
		if j.ETA > 0 {
			eta = j.ETA.Round(time.Second).String()
		}
		rows = append(rows, []any{j.ID, j.Schema, j.Table, j.Type, j.State, j.Stage,
			j.RowsDone, j.RowsEstimate, int64(j.Rate), eta, ts(j.Start), ts(j.End), j.Query, j.Error})
	}
	if len(rows) == 0 {
		// go-mysql needs a row to type the columns; send the header only.
		rs, err := plugins.TextResultset(jobsColumns, [][]any{{int64(0), "", "", "", "", "", int64(0), int64(0), int64(0), "", "", "", "", ""}})
		if err != nil {
			return nil, err
		}
		rs.Values, rs.RowDatas = nil, nil
		return rs, nil
	}
	return plugins.TextResultset(jobsColumns, rows)
}

// janitor drops kept old tables when their retention ends.
func (p *Plugin) janitor() {
	defer p.wg.Done()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		p.dropDueOldTables()
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *Plugin) dropDueOldTables() {
	now := time.Now()
	for _, rec := range p.jobs.records() {
		j := rec.snapshot()
		if j.DropOldAt.IsZero() || j.DropOldAt.After(now) {
			continue
		}
		if err := p.dropOld(j); err != nil {
			p.log.Warn("ddl: cannot drop a kept old table; retrying later", "job", j.ID, "table", j.Old, "err", err)
			continue
		}
		_ = p.jobs.update(rec, func(j *Job) { j.DropOldAt = time.Time{} })
	}
}

func (p *Plugin) dropOld(j Job) error {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	c, err := p.backend.Connect(ctx, j.User, "")
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Execute("DROP TABLE IF EXISTS " + tableName(j.Schema, j.Old))
	if err == nil {
		p.log.Info("ddl: dropped the old table", "job", j.ID, "table", j.Schema+"."+j.Old)
	}
	return err
}
