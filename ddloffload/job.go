package ddloffload

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"tableproxy/internal/atomicfile"
	"tableproxy/internal/mysqlwire"
)

// Stage is where a job is in its pipeline. Run calls them in this order.
type Stage int32

const (
	StageQueued Stage = iota
	StagePreflight
	StageShadow
	StageBinlog
	StageBackfill
	StageSort
	StageCatchUp
	StageBuild
	StageVerify
	StageCutOver
	StageCleanup
	StageNative // the guarded native strategy's ALTER (see native.go)
	StageDone
)

var stageNames = [...]string{"queued", "preflight", "shadow", "binlog", "backfill", "sort", "catch-up", "build", "verify", "cut-over", "cleanup", "native", "done"}

func (s Stage) String() string {
	if s >= 0 && int(s) < len(stageNames) {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", int32(s))
}

// The states a job ends in; "running" while it runs.
const (
	StateRunning   = "running"
	StateDone      = "done"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StatePaused    = "paused"    // shown for a running job that is paused
	StateThrottled = "throttled" // shown for a running job whose copy waits for the backend or its replicas
)

// Job is one ADD INDEX job as it is kept on disk and shown by ADMIN SHOW DDL
// JOBS.
type Job struct {
	ID           int64         `json:"id"`
	Schema       string        `json:"schema"`
	Table        string        `json:"table"`
	Type         string        `json:"type"`
	Query        string        `json:"query"`
	DB           string        `json:"db,omitempty"` // the session's database, for unqualified names in Query
	User         string        `json:"user"`
	State        string        `json:"state"`
	Stage        string        `json:"stage"`
	RowsDone     int64         `json:"rows_done"`
	RowsEstimate int64         `json:"rows_estimate"`
	Rate         float64       `json:"rate,omitempty"` // rows copied a second
	ETA          time.Duration `json:"-"`              // while copying: time left at Rate
	Start        time.Time     `json:"start"`
	End          time.Time     `json:"end,omitzero"`
	Error        string        `json:"error,omitempty"`
	ErrorCode    uint16        `json:"error_code,omitempty"`
	Shadow       string        `json:"shadow,omitempty"`
	Old          string        `json:"old,omitempty"`
	DropOldAt    time.Time     `json:"drop_old_at,omitzero"` // when the kept old table is due to be dropped
	// KeptSchema and KeptName are where the kept original was moved out of
	// the application's schema (kept_tables_schema); "" while it is beside
	// the table, as Old.
	KeptSchema   string             `json:"kept_schema,omitempty"`
	KeptName     string             `json:"kept_name,omitempty"`
	StageSeconds map[string]float64 `json:"stage_seconds,omitempty"`
	// Checkpoint is where a running job is, durably enough to resume it
	// after a proxy stop.
	Checkpoint Checkpoint `json:"checkpoint,omitzero"`
	// CancelRequested and Paused are ADMIN CANCEL and PAUSE, kept so that
	// a job stopped by a proxy stop is rolled back, or resumed paused.
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	Paused          bool   `json:"paused,omitempty"`
	Resumes         int    `json:"resumes,omitempty"`         // times resumed after a proxy stop
	Strategy        string `json:"strategy,omitempty"`        // the strategy the job runs (backfill or native)
	StrategyReason  string `json:"strategy_reason,omitempty"` // why: the setting that asked for it, or what auto saw
	// A postponed cut-over (complete.go): since when the job has been
	// ready, and the word to go (now, or at CompleteAt).
	ReadySince        time.Time `json:"ready_since,omitzero"`
	CompleteRequested bool      `json:"complete_requested,omitempty"`
	CompleteAt        time.Time `json:"complete_at,omitzero"`
	// CutOverAttempt is the cut-over's attempt under way (cutover.go), and
	// BlockedBy who held up its last failed one.
	CutOverAttempt int    `json:"cutover_attempt,omitempty"`
	BlockedBy      string `json:"blocked_by,omitempty"`
	// The replicas' lag as the throttle read it (replicas.go): the most
	// seen, how often and how long it held the copy, and each replica's
	// last state.
	ReplicaLagMaxMs int64   `json:"replica_lag_max_ms,omitempty"`
	LagHolds        int     `json:"lag_holds,omitempty"`
	LagHeldSeconds  float64 `json:"lag_held_seconds,omitempty"`
	Replicas        string  `json:"replicas,omitempty"`
}

// KeptTable is the job's original, swapped out and kept until KeptUntil
// (see cleanup.go); "" once dropped, or when there is none.
func (j Job) KeptTable() string {
	if j.DropOldAt.IsZero() {
		return ""
	}
	if j.KeptSchema != "" {
		return j.KeptSchema + "." + j.KeptName
	}
	return j.Old
}

// keptAt is the kept original's schema and name.
func (j Job) keptAt() (schema, name string) {
	if j.KeptSchema != "" {
		return j.KeptSchema, j.KeptName
	}
	return j.Schema, j.Old
}

// jobRec is a job in the registry: its record, and the live counters a
// running job updates without the registry's lock.
type jobRec struct {
	mu        sync.Mutex // guards job and cancel
	job       Job
	cancel    context.CancelFunc // set while the job runs here
	swapped   *atomic.Bool       // the running job's: its RENAME happened
	rowsDone  atomic.Int64
	copyStart atomic.Int64 // when the backfill began, in Unix nanoseconds
	copyBase  atomic.Int64 // rows done before this run's backfill: a resumed copy's rate leaves them out
	pace      pace         // the copy's recent rows a second, for the ETA (pace.go)
	stage     atomic.Int32
	cancelled atomic.Bool
	gate      gate
	wake      chan struct{}          // a postponed job's word to look again (complete.go)
	throttled atomic.Pointer[string] // why the copy waits, while it does
	replicas  atomic.Pointer[string] // the replicas' states, while a throttle reads them
}

// snapshot returns a copy of the record with the live counters in it.
func (r *jobRec) snapshot() Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.job
	if j.State == StateRunning {
		j.RowsDone = r.rowsDone.Load()
		j.Stage = Stage(r.stage.Load()).String()
		if start := r.copyStart.Load(); start > 0 {
			took := time.Since(time.Unix(0, start))
			if secs, done := j.StageSeconds[StageBackfill.String()]; done {
				took = time.Duration(secs * float64(time.Second))
			}
			if took > 0 {
				j.Rate = float64(j.RowsDone-r.copyBase.Load()) / took.Seconds()
			}
			rate := r.pace.recent()
			if rate <= 0 {
				rate = j.Rate
			}
			if Stage(r.stage.Load()) == StageBackfill && rate > 0 && j.RowsEstimate > j.RowsDone {
				j.ETA = time.Duration(float64(j.RowsEstimate-j.RowsDone) / rate * float64(time.Second))
			}
		}
	}
	if j.State == StateRunning && r.gate.isPaused() {
		j.State = StatePaused
	}
	if reps := r.replicas.Load(); j.State == StateRunning && reps != nil {
		j.Replicas = *reps
	}
	if why := r.throttled.Load(); j.State == StateRunning && why != nil && *why != "" {
		j.State = StateThrottled
	}
	j.StageSeconds = nil
	return j
}

// registry is every job this proxy knows, running or past, kept in a file
// in the data directory that is replaced atomically on every change (a
// crash leaves the old or the new list, never a torn one).
type registry struct {
	path string
	keep int // past jobs kept in the file

	mu     sync.Mutex // guards jobs, nextID and the file
	jobs   map[int64]*jobRec
	nextID int64
}

const jobsFile = "ddl_jobs.json"

func openRegistry(dir string, keep int) (*registry, error) {
	g := &registry{path: filepath.Join(dir, jobsFile), keep: keep, jobs: map[int64]*jobRec{}, nextID: 1}
	var list []Job
	if _, err := atomicfile.ReadJSON(g.path, &list); err != nil {
		return nil, fmt.Errorf("ddl jobs: %w", err)
	}
	for _, j := range list {
		rec := &jobRec{job: j, wake: make(chan struct{}, 1)}
		rec.rowsDone.Store(j.RowsDone)
		if i := slices.Index(stageNames[:], j.Stage); i >= 0 {
			rec.stage.Store(int32(i))
		}
		g.jobs[j.ID] = rec
		g.nextID = max(g.nextID, j.ID+1)
	}
	return g, nil
}

// add registers a new running job and saves the list. One job runs on a
// table at a time.
func (g *registry) add(j Job) (*jobRec, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, busy := g.runningOnLocked(j.Schema, j.Table); busy {
		return nil, errUnsupported(fmt.Sprintf("job %d is already adding an index to %s", id, mysqlwire.QuoteTable(j.Schema, j.Table)))
	}
	j.ID = g.nextID
	rec := &jobRec{job: j, wake: make(chan struct{}, 1)}
	g.jobs[j.ID] = rec
	if err := g.saveLocked(); err != nil {
		delete(g.jobs, j.ID)
		return nil, err
	}
	g.nextID++
	return rec, nil
}

// update changes a job's record with f and saves the list.
func (g *registry) update(rec *jobRec, f func(*Job)) error {
	rec.mu.Lock()
	f(&rec.job)
	rec.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.saveLocked()
}

// list returns every job, newest first.
func (g *registry) list() []Job {
	g.mu.Lock()
	recs := make([]*jobRec, 0, len(g.jobs))
	for _, r := range g.jobs {
		recs = append(recs, r)
	}
	g.mu.Unlock()
	out := make([]Job, len(recs))
	for i, r := range recs {
		out[i] = r.snapshot()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out
}

// runningOn returns the id of the job running on schema.table, if any.
func (g *registry) runningOn(schema, table string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runningOnLocked(schema, table)
}

func (g *registry) runningOnLocked(schema, table string) (int64, bool) {
	for id, r := range g.jobs {
		r.mu.Lock()
		busy := r.job.State == StateRunning && r.job.Schema == schema && r.job.Table == table
		r.mu.Unlock()
		if busy {
			return id, true
		}
	}
	return 0, false
}

// get returns the job with id.
func (g *registry) get(id int64) *jobRec {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.jobs[id]
}

// records returns every job's live record.
func (g *registry) records() []*jobRec {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*jobRec, 0, len(g.jobs))
	for _, r := range g.jobs {
		out = append(out, r)
	}
	return out
}

func (g *registry) saveLocked() error {
	list := make([]Job, 0, len(g.jobs))
	for _, r := range g.jobs {
		r.mu.Lock()
		j := r.job
		r.mu.Unlock()
		if j.State == StateRunning {
			j.RowsDone = r.rowsDone.Load()
		}
		list = append(list, j)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	// Past jobs beyond keep are forgotten, oldest first; running ones and
	// ones with an old table still to drop are always kept.
	for len(list) > g.keep {
		i := slices.IndexFunc(list, func(j Job) bool { return j.State != StateRunning && j.DropOldAt.IsZero() })
		if i < 0 {
			break
		}
		delete(g.jobs, list[i].ID)
		list = append(list[:i], list[i+1:]...)
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(g.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("ddl jobs: %w", err)
	}
	return nil
}

// stageWeights is each stage's share of a job's time, roughly as measured
// on 2M rows, so that the overall percent moves about evenly: the copy
// dominates, then the index build.
var stageWeights = map[Stage]float64{
	StagePreflight: 0.5, StageShadow: 0.5, StageBinlog: 0.5, StageBackfill: 60, StageSort: 3,
	StageCatchUp: 2, StageBuild: 25, StageVerify: 7, StageCutOver: 1, StageCleanup: 0.5,
}

// StageProgress is how far the job is within its stage, 0 to 1: the copy
// by rows, the other stages 0 until they end.
func (j Job) StageProgress() float64 {
	if (j.Stage == StageBackfill.String() || j.Stage == StageNative.String()) && j.RowsEstimate > 0 {
		return min(1, float64(j.RowsDone)/float64(j.RowsEstimate))
	}
	if j.Stage == StageDone.String() {
		return 1
	}
	return 0
}

// progressReport is the job as a MariaDB progress report shows it: its
// stage's number among its strategy's stages, their number, the percent
// done within the stage, and the stage's name (and "paused" or
// "throttled" when it waits).
func (j Job) progressReport() (stage, maxStage int, percent float64, info string) {
	stages := []Stage{StagePreflight, StageShadow, StageBinlog, StageBackfill, StageSort, StageCatchUp, StageBuild,
		StageVerify, StageCutOver, StageCleanup}
	if j.Strategy == StrategyNative {
		stages = []Stage{StagePreflight, StageNative}
	}
	cur := stageByName(j.Stage)
	stage = max(1, slices.Index(stages, cur)+1)
	info = j.Stage
	if j.State == StatePaused || j.State == StateThrottled {
		info += " (" + j.State + ")"
	}
	return stage, len(stages), 100 * j.StageProgress(), info
}

// Progress is how far the job is overall, 0 to 100.
func (j Job) Progress() float64 {
	cur := stageByName(j.Stage)
	if cur == StageDone {
		return 100
	}
	if cur == StageNative {
		return 1 + 99*j.StageProgress()
	}
	var total, done float64
	for s, w := range stageWeights {
		total += w
		switch {
		case s < cur:
			done += w
		case s == cur:
			done += w * j.StageProgress()
		}
	}
	return 100 * done / total
}

func stageByName(name string) Stage {
	if i := slices.Index(stageNames[:], name); i >= 0 {
		return Stage(i)
	}
	return StageQueued
}

// formatPercent renders a percent with one decimal.
func formatPercent(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) }

// persist saves the list as it is.
func (p *Plugin) persist() {
	p.jobs.mu.Lock()
	defer p.jobs.mu.Unlock()
	if err := p.jobs.saveLocked(); err != nil {
		p.log.Error("ddl: cannot save the jobs file", "err", err)
	}
}
