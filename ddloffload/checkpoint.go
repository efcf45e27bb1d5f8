package ddloffload

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Checkpoint is what a job has made durable, in its record in the jobs
// file, so that after a proxy stop it goes on from there instead of from
// the start:
//
//   - The binary-log position the job's stream started at (P0). Every
//     change to the table after P0 is in the log, so a resumed job follows
//     the log from P0 again and finds every key changed since, whatever it
//     had already applied: copying a key again is harmless. A log purged
//     since then fails the resumed job, which then rolls back.
//   - The secondary indexes the shadow defers, which the shadow itself no
//     longer shows.
//   - The copy's watermark: every row whose key is at most Watermark was
//     copied (ranges finish out of order; the watermark is the end of the
//     longest run of finished ranges from the start), saved at most every
//     second. Ranges finished above it since are in the job's range log
//     (rangelog.go), written as each finishes; a resumed copy keeps those
//     the shadow holds whole, and deletes and copies again only the rest:
//     at most the ranges the workers were copying when the proxy stopped.
//   - The sort's runs (see sort.go): files in the temp dir that hold the
//     sorted keys of every range up to the watermark.
//
// Before any of it exists (the job stopped in preflight, shadow or
// binlog), a resumed job starts over, dropping whatever shadow it made.
type Checkpoint struct {
	BinlogFile string   `json:"binlog_file,omitempty"`
	BinlogPos  uint32   `json:"binlog_pos,omitempty"`
	KeyName    string   `json:"key_name,omitempty"` // the key the copy walks; a resumed job needs the same
	Deferred   []string `json:"deferred,omitempty"`
	Watermark  []string `json:"watermark,omitempty"` // key literals; nil: nothing copied yet
	CopyDone   bool     `json:"copy_done,omitempty"`
	Rows       int64    `json:"rows,omitempty"`        // rows copied up to the watermark
	RangeEpoch int      `json:"range_epoch,omitempty"` // the run of the copy whose range log goes with the watermark; 0: none
	MarkSeq    int64    `json:"mark_seq,omitempty"`    // that run's last range below the watermark; 0: none yet
	Runs       []string `json:"runs,omitempty"`
	IndexNames []string `json:"index_names,omitempty"` // as preflight named them, so a resumed job adds the same
	Settings   Settings `json:"settings,omitzero"`     // the job's settings, kept across a resume
}

// started reports whether the stream's start is recorded: from there on a
// resumed job keeps its shadow.
func (c Checkpoint) started() bool { return c.BinlogFile != "" }

func (c Checkpoint) position() mysql.Position {
	return mysql.Position{Name: c.BinlogFile, Pos: c.BinlogPos}
}

// checkpointEvery is how often the copy's watermark is written to the jobs
// file at most: each write is an fsync. What the workers copied since is
// in the range log, so the interval bounds the log's length, not the work
// a resume redoes.
const checkpointEvery = time.Second

// checkpointEnv names the fault tests' hook that changes checkpointEvery
// (a duration), so that a test can stop a copy far above its checkpoint.
const checkpointEnv = "TABLEPROXY_DDL_CHECKPOINT_EVERY"

func checkpointEveryFromEnv() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(checkpointEnv)); err == nil && d > 0 {
		return d
	}
	return checkpointEvery
}

// saveCheckpoint records the runner's checkpoint in the job's record.
func (r *runner) saveCheckpoint() error {
	cp := r.cp
	cp.Deferred, cp.Watermark, cp.Runs = slices.Clone(cp.Deferred), slices.Clone(cp.Watermark), slices.Clone(cp.Runs)
	cp.IndexNames = slices.Clone(cp.IndexNames)
	return r.p.jobs.update(r.rec, func(j *Job) { j.Checkpoint = cp })
}

// copyTracker follows which key ranges the copy has finished, and moves
// the watermark past every range finished with all before it. Ranges are
// named by sequence numbers that grow in key order but need not be
// consecutive (see copyPlan); cut gives them in key order.
type copyTracker struct {
	mu      sync.Mutex // guards the fields below; taken once per range
	order   []int64    // ranges cut and still above the watermark, in key order
	his     map[int64][]string
	rows    map[int64]int64
	mark    copyMark
	changed bool
}

// copyMark is the copy's watermark.
type copyMark struct {
	key  []string // every row up to it is copied; nil: none yet
	rows int64    // rows copied up to key
	seq  int64    // the last range below key; 0: none of this run's yet
	end  bool     // the last range is below the watermark: the copy is done
}

func newCopyTracker(from []string, rows int64) *copyTracker {
	return &copyTracker{his: map[int64][]string{}, rows: map[int64]int64{}, mark: copyMark{key: from, rows: rows}}
}

// cut records range seq's upper bound (nil: the end of the table).
func (c *copyTracker) cut(seq int64, hi []string) {
	c.mu.Lock()
	c.order = append(c.order, seq)
	c.his[seq] = hi
	c.mu.Unlock()
}

// finish records that range seq is copied, with n rows.
func (c *copyTracker) finish(seq int64, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows[seq] = n
	for len(c.order) > 0 {
		next := c.order[0]
		n, ok := c.rows[next]
		if !ok {
			return
		}
		hi := c.his[next]
		delete(c.rows, next)
		delete(c.his, next)
		c.order = c.order[1:]
		c.mark.rows += n
		c.mark.seq = next
		c.changed = true
		if hi == nil {
			c.mark.end = true
			return
		}
		c.mark.key = hi
	}
}

// watermark returns the watermark, and whether it moved since the last
// call.
func (c *copyTracker) watermark() (copyMark, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := c.changed
	c.changed = false
	return c.mark, changed
}

// jobMarker begins every statement a job sends that writes, so that one
// still running on the backend after the proxy that sent it died can be
// found in the process list (see killOrphans).
func jobMarker(id int64) string { return fmt.Sprintf("/* tableproxy ddl job %d */ ", id) }

// killOrphans ends the statements that a stopped run of job id left on the
// backend: after a kill -9 of the proxy, a copy statement or an index
// build goes on there until it ends, and would otherwise write into the
// shadow behind the resumed job's back. It returns once none is left.
func killOrphans(ctx context.Context, c *client.Conn, id int64) error {
	like := strings.TrimSpace(jobMarker(id)) + "%"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := c.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()", like)
		if err != nil {
			return err
		}
		if res.RowNumber() == 0 {
			return nil
		}
		for i := 0; i < res.RowNumber(); i++ {
			cid, _ := res.GetUint(i, 0)
			// A connection gone meanwhile is fine (1094, unknown thread).
			_, _ = c.Execute(fmt.Sprintf("KILL %d", cid))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("statements of an earlier run of job %d still run on the backend", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stallEnv names the fault tests' hook: TABLEPROXY_DDL_STALL=<stage> or
// <stage>:<duration> stops every job at one point inside that stage (one
// where the stage has done part of its work) for the duration (default
// 30s), so that a test can kill the proxy, or cancel or pause the job,
// there and nowhere else. Unset, it costs nothing.
const stallEnv = "TABLEPROXY_DDL_STALL"

type stallPoint struct {
	stage Stage
	d     time.Duration
}

func parseStall(v string) (stallPoint, bool) {
	if v == "" {
		return stallPoint{}, false
	}
	name, dur, _ := strings.Cut(v, ":")
	i := slices.Index(stageNames[:], name)
	if i < 0 {
		return stallPoint{}, false
	}
	sp := stallPoint{stage: Stage(i), d: 30 * time.Second}
	if d, err := time.ParseDuration(dur); err == nil {
		sp.d = d
	}
	return sp, true
}

func stallFromEnv() (stallPoint, bool) { return parseStall(os.Getenv(stallEnv)) }

// stall waits at the fault tests' point in stage s, if one is set there.
func (r *runner) stall(ctx context.Context, s Stage) error {
	sp, ok := r.p.stall, r.p.stallOn
	if !ok || sp.stage != s || Stage(r.rec.stage.Load()) != s {
		return nil
	}
	r.log.Warn("ddl: stalled for a fault test", "stage", s.String(), "for", sp.d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(sp.d):
		return nil
	}
}
