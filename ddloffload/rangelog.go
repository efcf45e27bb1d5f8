package ddloffload

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"tableproxy/internal/atomicfile"
	"tableproxy/internal/mysqlwire"
)

// The range log keeps what a copy finished above its checkpoint, so that
// a copy stopped by a proxy stop (kill -9 included) redoes only the ranges
// its workers were copying, not everything since the last checkpoint.
//
// Each range a worker finishes is appended to the job's log,
// <data dir>/ddl_job_<id>.ranges, as one line: a CRC-32 and the record (the
// run of the copy, the range's sequence number in that run, its bounds,
// the rows its copy inserted). One write, no fsync of its own (the
// checkpoint's save syncs it): a killed proxy loses nothing the kernel
// has; a crashed host may lose the tail or tear a line, which the CRC
// rejects, and a lost record only means a range copied again.
//
// A resumed copy (planCopy) keeps a logged range when
//
//   - it is of the run the checkpoint names, after that run's last range
//     below the watermark: within a run, sequence numbers grow in key
//     order, so these ranges are above the watermark and do not overlap;
//   - the shadow holds exactly the rows its copy inserted. During the copy
//     the shadow gets no other writes (changes wait in the stream as dirty
//     keys, and the stopped run's statements are killed first, see
//     killOrphans), so a range whose copy did not commit, or committed
//     only some of its INSERTs (read_ahead sends several), holds fewer.
//
// Every other row above the watermark is deleted, and only the gaps
// between kept ranges are walked and copied again. Keeping a range is
// sound for the changes made to its rows after its copy: the resumed
// stream starts again at P0, taken before the copy began, so each of them
// marks its key dirty and the catch-up copies the row again. For the
// UNIQUE sort, a kept range's entries may have been only in the stopped
// run's memory: they are read again from the shadow (what was copied)
// before the copy goes on. A row can then reach the sort twice (its
// entries were also spilled at a checkpoint); the merge counts the equal
// keys of one primary key as one row.
//
// Before the new run copies anything, the log is replaced (atomically) by
// one holding only the kept ranges, numbered in the new run, and the
// checkpoint names the new run: the log never holds two runs' ranges, so
// its ranges never overlap.

// rangeRecord is one finished range in the log.
type rangeRecord struct {
	Epoch int      `json:"e"`  // the run of the copy (1 + the job's resumes)
	Seq   int64    `json:"s"`  // in that run's key order
	Lo    []string `json:"lo"` // exclusive; nil: the start
	Hi    []string `json:"hi"` // inclusive; nil: the end
	Rows  int64    `json:"n"`  // rows its copy inserted
}

func (rr rangeRecord) keyRange() keyRange { return keyRange{rr.Lo, rr.Hi} }

func encodeRangeRecord(rec rangeRecord) []byte {
	js, _ := json.Marshal(rec)
	return fmt.Appendf(nil, "%08x %s\n", crc32.ChecksumIEEE(js), js)
}

// parseRangeLog returns the ranges of data logged by run epoch after
// sequence number after, in key order; a torn or corrupt line is skipped.
func parseRangeLog(data []byte, epoch int, after int64) []rangeRecord {
	var out []rangeRecord
	for {
		line, rest, ok := bytes.Cut(data, []byte{'\n'})
		if !ok {
			break // nothing, or a torn last line
		}
		data = rest
		sum, js, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(sum) != 8 {
			continue
		}
		want, err := strconv.ParseUint(string(sum), 16, 32)
		if err != nil || uint32(want) != crc32.ChecksumIEEE(js) {
			continue
		}
		var rec rangeRecord
		if json.Unmarshal(js, &rec) != nil || rec.Epoch != epoch || rec.Seq <= after {
			continue
		}
		out = append(out, rec)
	}
	slices.SortStableFunc(out, func(a, b rangeRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b rangeRecord) bool { return a.Seq == b.Seq })
}

// rangeLog is a run's log, open for appending.
type rangeLog struct {
	epoch int
	mu    sync.Mutex // guards the fields below; the copy's workers append under it
	f     *os.File
	err   error // the first failed write: later ranges are not logged, and are copied again after a stop
}

// createRangeLog replaces the log at path by one holding kept, and opens
// it for run epoch to append to.
func createRangeLog(path string, epoch int, kept []rangeRecord) (*rangeLog, error) {
	var data []byte
	for _, k := range kept {
		data = append(data, encodeRangeRecord(k)...)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("range log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("range log: %w", err)
	}
	return &rangeLog{epoch: epoch, f: f}, nil
}

// done logs range seq as copied, with n rows.
func (l *rangeLog) done(seq int64, kr keyRange, n int64) {
	b := encodeRangeRecord(rangeRecord{Epoch: l.epoch, Seq: seq, Lo: kr.lo, Hi: kr.hi, Rows: n})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = err
	}
}

// sync makes what is logged durable; it reports the first failed write.
func (l *rangeLog) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return l.f.Sync()
}

func (l *rangeLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
}

// rangeLogPath is job id's range log, beside the jobs file.
func (p *Plugin) rangeLogPath(id int64) string {
	return filepath.Join(filepath.Dir(p.jobs.path), fmt.Sprintf("ddl_job_%d.ranges", id))
}

// planPart is a stretch of the key above the watermark: a gap the walk
// cuts into ranges and copies, or a range kept from a stopped run.
type planPart struct {
	keyRange
	seq  int64 // a kept range's sequence number; a gap's first range's, the next ones following it
	kept bool
	rows int64 // a kept range's rows
}

// partSeq numbers part i's ranges from (i+1)<<32: they stay in key order
// across the parts however many ranges the walk cuts a gap into.
func partSeq(i int) int64 { return int64(i+1) << 32 }

// planParts lays out the key above from: the kept ranges (of one run, in
// key order, above from) and the gaps around them, to the end of the
// table.
func planParts(from []string, kept []rangeRecord) []planPart {
	var out []planPart
	add := func(p planPart) {
		p.seq = partSeq(len(out))
		out = append(out, p)
	}
	lo := from
	for _, k := range kept {
		if !slices.Equal(lo, k.Lo) {
			add(planPart{keyRange: keyRange{lo, k.Lo}})
		}
		add(planPart{keyRange: k.keyRange(), kept: true, rows: k.Rows})
		if lo = k.Hi; lo == nil {
			return out
		}
	}
	add(planPart{keyRange: keyRange{lo, nil}})
	return out
}

// planCopy readies this run of the copy and returns its plan, and the
// rows a resumed copy deleted to copy them again: it keeps the logged
// ranges the shadow holds whole, deletes every other row above the
// watermark, and gives the sort the kept ranges' keys again. The new log
// and the checkpoint naming its run are saved before anything is copied.
func (r *runner) planCopy(ctx context.Context) ([]planPart, int64, error) {
	path := r.p.rangeLogPath(r.rec.job.ID)
	var kept []rangeRecord
	if r.resumed {
		var err error
		if kept, err = r.keptRanges(path); err != nil {
			return nil, 0, err
		}
	}
	plan := planParts(r.cp.Watermark, kept)
	epoch := r.rec.snapshot().Resumes + 1
	var recs []rangeRecord
	for _, p := range plan {
		if p.kept {
			recs = append(recs, rangeRecord{Epoch: epoch, Seq: p.seq, Lo: p.lo, Hi: p.hi, Rows: p.rows})
		}
	}
	l, err := createRangeLog(path, epoch, recs)
	if err != nil {
		return nil, 0, err
	}
	r.ranges = l
	r.cp.RangeEpoch, r.cp.MarkSeq = epoch, 0
	if err := r.saveCheckpoint(); err != nil {
		return nil, 0, err
	}
	if !r.resumed {
		return plan, 0, nil
	}
	shadow := mysqlwire.QuoteTable(r.t.Schema, r.shadow)
	var again int64
	for _, p := range plan {
		if p.kept {
			continue
		}
		res, err := r.conn.Execute(r.mark + "DELETE FROM " + shadow + " WHERE " + r.t.rangeCond(p.keyRange))
		if err != nil {
			return nil, 0, err
		}
		again += int64(res.AffectedRows)
	}
	if len(r.sorters) > 0 && len(kept) > 0 {
		c, err := r.connect(ctx)
		if err != nil {
			return nil, 0, err
		}
		defer c.Close()
		if _, err := c.Execute("SET SESSION character_set_results = binary"); err != nil {
			return nil, 0, err
		}
		for _, k := range kept {
			if err := r.readSortKeys(c, shadow, k.keyRange()); err != nil {
				return nil, 0, err
			}
		}
	}
	return plan, again, nil
}

// keptRanges returns the ranges of the log at path that a resumed copy
// keeps: logged by the checkpoint's run above its watermark, and held
// whole by the shadow.
func (r *runner) keptRanges(path string) ([]rangeRecord, error) {
	if r.cp.RangeEpoch == 0 {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("range log: %w", err)
	}
	cands := parseRangeLog(data, r.cp.RangeEpoch, r.cp.MarkSeq)
	var kept []rangeRecord
	const batch = 64 // ranges counted per statement, in one pass over the shadow above the watermark
	above := ""
	if r.cp.Watermark != nil {
		above = " WHERE " + r.t.keyCompare(">", r.cp.Watermark)
	}
	for len(cands) > 0 {
		n := min(len(cands), batch)
		counts := make([]string, n)
		for i, c := range cands[:n] {
			counts[i] = "COUNT(CASE WHEN " + r.t.rangeCond(c.keyRange()) + " THEN 1 END)"
		}
		res, err := r.conn.Execute("SELECT " + strings.Join(counts, ", ") + " FROM " + mysqlwire.QuoteTable(r.t.Schema, r.shadow) + above)
		if err != nil {
			return nil, err
		}
		for i, c := range cands[:n] {
			if got, err := res.GetInt(0, i); err == nil && got == c.Rows {
				kept = append(kept, c)
			}
		}
		cands = cands[n:]
	}
	return kept, nil
}
