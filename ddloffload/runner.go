package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// runner runs one job: Run calls each stage in order, and reading it tells
// the whole algorithm. Each stage is in its own file.
type runner struct {
	replicas *replicaWatch // the replicas the throttles read (replicas.go)
	p        *Plugin
	rec      *jobRec
	req      *Request
	user     string
	log      *slog.Logger
	set      Settings   // the job's knobs
	cp       Checkpoint // what the job has made durable (see checkpoint.go)
	mark     string     // jobMarker, prefixed to the statements that write

	resumed    bool             // resumed after a proxy stop
	nativeDone bool             // a resumed native job whose ALTER had finished
	rowsBase   int64            // rows copied before this run, for the rate
	counted    atomic.Bool      // the table's rows were counted (countRows)
	fgBase     [2]time.Duration // the foreground's p99s without the job (statements, transactions), once a throttle measured them
	share      float64          // the copy's share when the job's last throttle stopped (see throttle.share)
	shareKept  bool             // a throttle has stopped: share holds
	cpMu       sync.Mutex       // guards cp while the copy's goroutines save it

	uniques   []uniqueIndex // the new UNIQUE indexes, checked by the sort
	sorters   []*sorter     // one per unique index
	sortBytes atomic.Int64  // bytes of runs on disk, against the quota
	runSeq    atomic.Int64  // names runs
	ranges    *rangeLog     // the copy's finished ranges (rangelog.go)

	conn        *client.Conn // the job's control connection
	logConn     *client.Conn // as the binary-log user, for log positions
	logMu       sync.Mutex   // guards logConn after the binlog stage
	t           *tableInfo
	shadow      string // the table with the final schema (see shadowNames)
	old         string // what the original is renamed to, and kept as
	deferred    []string
	stream      *stream
	shareClause string           // how a live catch-up batch share-locks its keys (see shareLock)
	shareOnce   sync.Once        // finds shareClause
	applyMu     sync.Mutex       // the verify's workers take turns applying dirty keys on conn
	raced       atomic.Int64     // keys copied again: their rows changed between a live copy's locking read and its copy
	afterLock   func([][]string) // tests: runs between a live copy's locking read and its copy
	created     bool             // the shadow exists and is the job's
	swapped     atomic.Bool      // the RENAME happened
	connID      atomic.Uint32
}

// stageFunc is one stage.
type stageFunc struct {
	stage Stage
	run   func(ctx context.Context) error
}

func (r *runner) stages() []stageFunc {
	if r.set.Strategy == StrategyNative {
		return []stageFunc{{StagePreflight, r.nativePreflight}, {StageNative, r.nativeAlter}}
	}
	return []stageFunc{
		{StagePreflight, r.preflight},
		{StageShadow, r.createShadow},
		{StageBinlog, r.startBinlog},
		{StageBackfill, r.backfill},
		{StageSort, r.sortStage},
		{StageCatchUp, r.catchUp},
		{StageBuild, r.buildIndexes},
		{StageVerify, r.verify},
		{StageCutOver, r.cutOver},
		{StageCleanup, r.cleanup},
	}
}

// runJob registers a job for req, runs it to its end, and returns the
// error the client gets (nil for OK).
func (p *Plugin) runJob(user, db, query string, req *Request, set Settings, report func(Job)) *mysql.MyError {
	rec, err := p.register(user, db, query, req, set)
	if err != nil {
		return err
	}
	p.wg.Add(1)
	defer p.wg.Done()
	if report != nil {
		defer p.reportProgress(rec, report)()
	}
	return p.execute(rec, req, false)
}

// startDetached registers a job for req and runs it in the background
// (tableproxy_ddl_async): the client gets the job's id at once, as one row
// (JOB_ID), and follows it with ADMIN SHOW DDL JOBS.
func (p *Plugin) startDetached(user, db, query string, req *Request, set Settings) plugins.Action {
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		w.SetStatus(w.Status() &^ mysql.SERVER_STATUS_IN_TRANS) // (as runJob's answer)
		rec, me := p.register(user, db, query, req, set)
		if me != nil {
			return w.WriteError(me)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = p.execute(rec, req, false) // its end is in the job's row
		}()
		rs, err := plugins.TextResultset([]string{"JOB_ID"}, [][]any{{rec.snapshot().ID}})
		if err != nil {
			return w.WriteError(errJob("%v", err))
		}
		w.Rows(1)
		return w.WriteResult(&mysql.Result{Resultset: rs})
	}))
}

// register records a new job for req.
func (p *Plugin) register(user, db, query string, req *Request, set Settings) (*jobRec, *mysql.MyError) {
	j := Job{Schema: req.Schema, Table: req.Table, Type: req.Kind(), Query: query, DB: db, User: user,
		State: StateRunning, Stage: StageQueued.String(), Start: time.Now(), Checkpoint: Checkpoint{Settings: set}, Strategy: set.Strategy}
	if set.Strategy != StrategyAuto {
		j.StrategyReason = strategyReason(set)
	}
	rec, err := p.jobs.add(j)
	if err != nil {
		return nil, clientError(err)
	}
	return rec, nil
}

// progressEvery is how often a client that asked for progress reports gets
// one (MariaDB's own progress_report_time is 5 s; a job's stages are
// shorter).
const progressEvery = time.Second

// reportProgress calls report with the job every progressEvery while it
// changes, until the returned func is called (before the job's answer is
// written: the two share the client's connection).
func (p *Plugin) reportProgress(rec *jobRec, report func(Job)) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		var last [4]any
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			j := rec.snapshot()
			stage, maxStage, percent, info := j.progressReport()
			if now := [4]any{stage, maxStage, percent, info}; now != last {
				last = now
				report(j)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// execute runs a registered job, new or resumed after a proxy stop, and
// records how it ended. A job stopped by the proxy's shutdown (not by
// ADMIN CANCEL) before its swap is left running in the jobs file with its
// shadow and checkpoint: the next start resumes it.
func (p *Plugin) execute(rec *jobRec, req *Request, resumed bool) *mysql.MyError {
	p.running.Add(1)
	defer p.running.Add(-1)
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	rec.mu.Lock()
	rec.cancel = cancel
	j := rec.job
	rec.mu.Unlock()
	r := &runner{p: p, rec: rec, req: req, user: j.User, cp: j.Checkpoint, resumed: resumed,
		log: p.log.With("job", j.ID, "table", req.Schema+"."+req.Table)}
	r.set = r.cp.Settings.withDefaults(p.opts)
	r.cp.Settings = r.set // a resumed job keeps them, whatever the next proxy's defaults
	r.mark = jobMarker(j.ID)
	r.log.Info("ddl: job started", "query", j.Query, "resumed", resumed, "workers", r.set.Workers, "batch_size", r.set.BatchSize)
	start := time.Now()
	stopKiller := context.AfterFunc(ctx, r.interrupt)
	rec.mu.Lock()
	rec.swapped = &r.swapped
	rec.mu.Unlock()
	runErr := r.run(ctx)
	stopKiller()
	if runErr == nil || !r.suspended() {
		r.removeTemp() // a stopped job's runs and range log are kept for its resume
		os.Remove(p.rangeLogPath(j.ID))
	}
	if runErr != nil && r.suspended() {
		r.log.Warn("ddl: job stopped by the proxy's shutdown; the next start resumes it", "stage", Stage(rec.stage.Load()).String(), "err", runErr)
		return mysql.NewError(mysql.ER_SERVER_SHUTDOWN, fmt.Sprintf("Server shutdown in progress (tableproxy DDL job %d goes on when the proxy starts again)", j.ID))
	}
	if runErr != nil && rec.cancelled.Load() && !r.swapped.Load() {
		runErr = mysql.NewError(mysql.ER_QUERY_INTERRUPTED, fmt.Sprintf("Query execution was interrupted (tableproxy DDL job %d cancelled)", j.ID))
	}
	if err := p.jobs.update(rec, func(j *Job) {
		j.End = time.Now()
		j.RowsDone = rec.rowsDone.Load()
		if secs := j.StageSeconds[StageBackfill.String()]; secs > 0 {
			j.Rate = float64(j.RowsDone-r.rowsBase) / secs
		}
		j.Checkpoint = Checkpoint{Settings: j.Checkpoint.Settings} // nothing to resume
		if runErr != nil {
			me := clientError(runErr)
			j.State, j.Error, j.ErrorCode = StateFailed, me.Message, me.Code
			if me.Code == mysql.ER_QUERY_INTERRUPTED && rec.cancelled.Load() {
				j.State = StateCancelled
			}
			return
		}
		j.State, j.Stage = StateDone, StageDone.String()
		if !r.counted.Load() && j.RowsDone > 0 {
			// The count had not ended: what the copy read is the table's
			// size as the job saw it.
			j.RowsEstimate = j.RowsDone
		}
	}); err != nil {
		r.log.Error("ddl: cannot record the job's end", "err", err)
	}
	if runErr != nil {
		r.log.Warn("ddl: job failed", "stage", Stage(rec.stage.Load()).String(), "err", runErr, "took", time.Since(start))
		return clientError(runErr)
	}
	r.p.wakeJanitor() // (its kept original now counts against kept_tables_max_bytes)
	r.log.Info("ddl: job done", "rows", rec.rowsDone.Load(), "took", time.Since(start))
	return nil
}

// suspended reports whether the job is stopping because the proxy is,
// not because it failed or was cancelled: it is then kept for a resume.
func (r *runner) suspended() bool {
	return r.p.ctx.Err() != nil && !r.rec.cancelled.Load() && !r.swapped.Load()
}

func (r *runner) run(ctx context.Context) (err error) {
	defer func() { r.release(err) }()
	if r.resumed {
		if err := r.prepareResume(ctx); err != nil {
			return err
		}
	}
	if r.set.Strategy == StrategyAuto {
		if err := r.chooseStrategy(ctx); err != nil {
			return err
		}
	}
	for _, s := range r.stages() {
		if err := ctx.Err(); err != nil && !r.swapped.Load() {
			return errJob("the proxy is shutting down")
		}
		if s.stage <= StageCutOver {
			// A pause holds the job before the cut-over at the latest.
			if err := r.rec.gate.wait(ctx); err != nil {
				return err
			}
		}
		r.rec.stage.Store(int32(s.stage))
		_ = r.p.jobs.update(r.rec, func(j *Job) { j.Stage = s.stage.String() })
		t0 := time.Now()
		if err := s.run(ctx); err != nil {
			return err
		}
		took := time.Since(t0)
		if (s.stage == StageNative || s.stage == StageBuild && len(r.deferred) > 0) && r.t != nil && took > 0 {
			r.p.buildRate.Store(int64(float64(r.t.DataLength) / took.Seconds()))
		}
		_ = r.p.jobs.update(r.rec, func(j *Job) {
			// A new map: copies of the record taken before (the list
			// being saved, a status read) share the old one.
			m := maps.Clone(j.StageSeconds)
			if m == nil {
				m = map[string]float64{}
			}
			m[s.stage.String()] = took.Seconds()
			j.StageSeconds = m
		})
		r.log.Info("ddl: stage done", "stage", s.stage.String(), "took", took)
	}
	return nil
}

// release stops what the job started. A job that failed before its swap
// drops its shadow: the original table was never touched.
func (r *runner) release(err error) {
	if r.stream != nil {
		r.stream.close()
	}
	if r.conn != nil {
		r.conn.Close() // first: whatever it holds on the shadow ends with it
	}
	if err != nil && r.created && !r.swapped.Load() && !r.suspended() {
		// On a connection of its own: a cancel's KILL QUERY aimed at the
		// control connection (interrupt) may land after the statement it
		// meant to stop, and would interrupt the DROP instead.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, cerr := r.connect(ctx)
		cancel()
		if cerr != nil {
			r.log.Error("ddl: cannot drop the shadow table of a failed job", "shadow", r.shadow, "err", cerr)
		} else {
			_, derr := c.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(r.t.Schema, r.shadow))
			c.Close()
			if derr != nil {
				r.log.Error("ddl: cannot drop the shadow table of a failed job", "shadow", r.shadow, "err", derr)
			}
		}
	}
	if r.logConn != nil {
		r.logConn.Close()
	}
	if r.replicas != nil {
		r.replicas.close()
	}
}

// interrupt stops the statement the control connection runs (the index
// build, a catch-up pass) when the job is cancelled or the proxy stops;
// the copy workers stop at their next chunk.
func (r *runner) interrupt() {
	id := r.connID.Load()
	if id == 0 || r.swapped.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := r.p.backend.Connect(ctx, r.user, "")
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Execute(fmt.Sprintf("KILL QUERY %d", id))
}

// connect opens a backend connection as the job's user, set up for the job.
func (r *runner) connect(ctx context.Context) (*client.Conn, error) {
	c, err := r.p.backend.Connect(ctx, r.user, "")
	if err != nil {
		return nil, err
	}
	if err := sessionSetup(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// sessionSetup makes a job connection independent of server defaults: no
// strict-mode surprises when copying values the table already holds, an
// AUTO_INCREMENT value 0 copied as 0, TIMESTAMPs read and written in UTC,
// backslash escapes in literals (mysqlwire.QuoteString relies on it),
// reads that take no locks (READ COMMITTED: each copy reads the latest
// committed rows without locking them, as InnoDB does under a ROW binary
// log), and autocommit on (a statement outside BEGIN ... COMMIT is its own
// transaction, whatever the server's default).
func sessionSetup(c *client.Conn) error {
	for _, q := range []string{
		"SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION', time_zone = '+00:00', autocommit = 1",
		"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
	} {
		if _, err := c.Execute(q); err != nil {
			return fmt.Errorf("session setup: %w", err)
		}
	}
	return nil
}

// lockAttempts is how many times the job tries a table lock outside the
// cut-over.
const lockAttempts = 5

func (r *runner) lockWait() time.Duration { return time.Duration(r.set.LockWaitTimeout) * time.Second }

// lockTables runs LOCK TABLES on c with a short lock_wait_timeout, trying
// a few times: a long transaction on the table makes the job wait, never a
// queue of blocked statements behind it.
func (r *runner) lockTables(ctx context.Context, c *client.Conn, spec string, attempts int, wait time.Duration) error {
	secs := max(1, int(wait/time.Second))
	if _, err := c.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return err
	}
	var errs []error
	for attempt := 0; attempt < attempts; attempt++ {
		_, err := c.Execute("LOCK TABLES " + spec)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if !isLockTimeout(err) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return fmt.Errorf("LOCK TABLES %s: %w", spec, errors.Join(errs...))
}

// erLockNowait is MySQL 8.0's error for a row lock NOWAIT could not take
// (MariaDB answers 1205, as for a lock wait timeout).
const erLockNowait = 3572

func isLockTimeout(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && (me.Code == mysql.ER_LOCK_WAIT_TIMEOUT || me.Code == mysql.ER_LOCK_DEADLOCK || me.Code == erLockNowait)
}
