package ddloffload

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
)

// keyRange is a range of the walk key: lo exclusive, hi inclusive; nil is
// unbounded.
type keyRange struct{ lo, hi []string }

func (t *tableInfo) rangeCond(kr keyRange) string {
	switch {
	case kr.lo == nil && kr.hi == nil:
		return "1"
	case kr.lo == nil:
		return t.keyCompare("<=", kr.hi)
	case kr.hi == nil:
		return t.keyCompare(">", kr.lo)
	}
	return t.keyCompare(">", kr.lo) + " AND " + t.keyCompare("<=", kr.hi)
}

// backfill copies the table into the shadow: one walker cuts the key into
// ranges of ChunkRows rows while Workers connections copy ranges already
// cut, each with INSERT ... SELECT ... ORDER BY key, a multi-row insert in
// key order whose read, under READ COMMITTED with a ROW binary log, is a
// consistent read that locks nothing. Chunks never overlap and the shadow
// gets no other writes meanwhile, so no insert can meet a row already there
// (changes made during the copy wait in the stream as dirty keys). Rows
// are never skipped (INSERT IGNORE) or overwritten (REPLACE): any error
// fails the job.
//
// The server-side copy was the fastest of the paths measured (6.3 s for 2M
// rows against 11.5 s reading rows into the proxy and writing them back),
// and it copies every value exactly, as the backend itself converts nothing.
func (r *runner) backfill(ctx context.Context) error {
	if err := r.setupSort(); err != nil {
		return err
	}
	if r.cp.CopyDone {
		r.rec.rowsDone.Store(r.cp.Rows)
		return nil
	}
	if r.resumed {
		again, err := r.trimShadow()
		if err != nil {
			return err
		}
		r.log.Info("ddl: copy resumed at its checkpoint", "rows_kept", r.cp.Rows, "rows_copied_again", again,
			"chunk_rows", r.set.BatchSize, "workers", r.set.Workers)
		r.rec.rowsDone.Store(r.cp.Rows)
		r.rowsBase = r.cp.Rows
	}
	r.rec.copyStart.Store(time.Now().UnixNano())
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ranges := make(chan seqRange, r.set.Workers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	track := newCopyTracker(r.cp.Watermark, r.cp.Rows)
	th, stopThrottle := r.startThrottle(ctx)
	defer stopThrottle()
	method := r.copyMethod()
	maxStmt, err := maxStatement(r.conn)
	if err != nil {
		return err
	}
	r.log.Info("ddl: copying", "method", method, "workers", r.set.Workers, "batch_size", r.set.BatchSize, "from", r.cp.Watermark)
	for w := 0; w < r.set.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if method == CopyReadAhead {
				err = r.readAheadWorker(ctx, ranges, maxStmt, th, track)
			} else {
				err = r.insertSelectWorker(ctx, ranges, th, track)
			}
			if err != nil {
				fail(err)
			}
			for range ranges {
				// drain: the walker stops at ctx's end
			}
		}()
	}
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		r.saveWatermarks(ctx, track)
	}()
	walkErr := r.walk(ctx, r.conn, r.cp.Watermark, func(seq int, kr keyRange) error {
		track.cut(seq, kr.hi)
		if seq == 2 {
			// The fault tests' point: two ranges handed out, the first
			// copied and in the checkpoint.
			r.waitWatermark(ctx, track)
			if err := r.stall(ctx, StageBackfill); err != nil {
				return err
			}
		}
		select {
		case ranges <- seqRange{seq, kr}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(ranges)
	wg.Wait()
	cancel()
	<-saverDone
	if firstErr != nil {
		return firstErr
	}
	if walkErr != nil {
		return walkErr
	}
	if err := outer.Err(); err != nil {
		return err
	}
	mark, rows, end, _ := track.watermark()
	if !end {
		return errJob("backfill: the copy ended before the end of the table")
	}
	runs, err := r.flushSort()
	if err != nil {
		return err
	}
	r.cp.Watermark, r.cp.Rows, r.cp.CopyDone, r.cp.Runs = mark, rows, true, runs
	return r.saveCheckpoint()
}

// insertSelectWorker copies ranges with INSERT ... SELECT.
func (r *runner) insertSelectWorker(ctx context.Context, ranges <-chan seqRange, th *throttle, track *copyTracker) error {
	c, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(r.sorters) > 0 {
		if _, err := c.Execute("SET SESSION character_set_results = binary"); err != nil {
			return err
		}
	}
	insert := r.mark + "INSERT INTO " + mysqlwire.QuoteTable(r.t.Schema, r.shadow) + " (" + r.t.copyColumns() + ") SELECT " +
		r.t.copyColumns() + " FROM " + r.t.name() + " WHERE "
	order := " ORDER BY " + r.t.keyList()
	for sr := range ranges {
		if err := r.rec.gate.wait(ctx); err != nil {
			return err
		}
		done, err := th.acquire(ctx)
		if err != nil {
			return err
		}
		res, err := c.Execute(insert + r.t.rangeCond(sr.keyRange) + order)
		done()
		if err != nil {
			return err
		}
		if len(r.sorters) > 0 {
			if err := r.readSortKeys(c, sr.keyRange); err != nil {
				return err
			}
		}
		r.rec.rowsDone.Add(int64(res.AffectedRows))
		track.finish(sr.seq, int64(res.AffectedRows))
	}
	return nil
}

// seqRange is a key range and its place in the walk.
type seqRange struct {
	seq int
	keyRange
}

// saveWatermarks writes the copy's watermark to the checkpoint whenever it
// moved, at most every checkpointEvery, until ctx ends.
func (r *runner) saveWatermarks(ctx context.Context, track *copyTracker) {
	tick := time.NewTicker(r.p.checkpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.saveWatermark(track)
	}
}

func (r *runner) saveWatermark(track *copyTracker) {
	mark, rows, _, changed := track.watermark()
	if !changed {
		return
	}
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	// Every range below the watermark gave its sort entries before it was
	// counted; spilled now, the runs hold them all.
	runs, err := r.flushSort()
	if err != nil {
		r.log.Warn("ddl: cannot spill the sort for a checkpoint", "err", err)
		return
	}
	r.cp.Watermark, r.cp.Rows, r.cp.Runs = mark, rows, runs
	if err := r.saveCheckpoint(); err != nil {
		r.log.Warn("ddl: cannot save the copy's checkpoint", "err", err)
	}
}

// waitWatermark waits until the watermark has moved and saves it; only the
// fault tests' stall needs that.
func (r *runner) waitWatermark(ctx context.Context, track *copyTracker) {
	if sp, ok := r.p.stall, r.p.stallOn; !ok || sp.stage != StageBackfill {
		return
	}
	for ctx.Err() == nil {
		track.mu.Lock()
		moved := track.next > 0
		track.mu.Unlock()
		if moved {
			r.saveWatermark(track)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// trimShadow deletes what a stopped run copied above the watermark: those
// ranges may be half done, and are copied again. It returns how many rows
// that is: the work the stop cost.
func (r *runner) trimShadow() (int64, error) {
	shadow := mysqlwire.QuoteTable(r.t.Schema, r.shadow)
	q := r.mark + "DELETE FROM " + shadow
	if r.cp.Watermark != nil {
		q += " WHERE " + r.t.keyCompare(">", r.cp.Watermark)
	}
	res, err := r.conn.Execute(q)
	if err != nil {
		return 0, err
	}
	return int64(res.AffectedRows), nil
}

// walk cuts the table's key into ranges of BatchSize rows, in key order,
// from the key after from (nil: the start), and hands them to out with
// their sequence number until the end of the table, which the last range
// leaves open.
func (r *runner) walk(ctx context.Context, c *client.Conn, from []string, out func(seq int, kr keyRange) error) error {
	lo := from
	for seq := 0; ; seq++ {
		where := ""
		if lo != nil {
			where = " WHERE " + r.t.keyCompare(">", lo)
		}
		res, err := c.Execute("SELECT " + r.t.keyList() + " FROM " + r.t.name() + where +
			" ORDER BY " + r.t.keyList() + " LIMIT 1 OFFSET " + strconv.Itoa(r.set.BatchSize-1))
		if err != nil {
			return err
		}
		var hi []string
		if res.RowNumber() > 0 {
			if hi, err = r.t.keyLiterals(res.Values[0]); err != nil {
				return err
			}
		}
		if err := r.rec.gate.wait(ctx); err != nil {
			return err
		}
		if err := out(seq, keyRange{lo, hi}); err != nil {
			return err
		}
		if hi == nil {
			return nil
		}
		lo = hi
	}
}

// keyLiterals renders a row of key values read through the text protocol.
func (t *tableInfo) keyLiterals(row []mysql.FieldValue) ([]string, error) {
	if len(row) != len(t.Key) {
		return nil, errors.New("key row has the wrong number of columns")
	}
	out := make([]string, len(row))
	for i, v := range row {
		var raw []byte
		switch v.Type {
		case mysql.FieldValueTypeNull:
		case mysql.FieldValueTypeUnsigned:
			raw = strconv.AppendUint(nil, v.AsUint64(), 10)
		case mysql.FieldValueTypeSigned:
			raw = strconv.AppendInt(nil, v.AsInt64(), 10)
		case mysql.FieldValueTypeString:
			raw = append([]byte{}, v.AsString()...)
		default:
			return nil, errors.New("key column " + t.Key[i].Name + " read as a floating-point value")
		}
		lit, err := t.Key[i].textLiteral(raw)
		if err != nil {
			return nil, err
		}
		out[i] = lit
	}
	return out, nil
}
