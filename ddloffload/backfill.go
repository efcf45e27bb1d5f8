package ddloffload

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
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
	r.rec.copyStart.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ranges := make(chan keyRange, r.p.opts.Workers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	insert := "INSERT INTO " + tableName(r.t.Schema, r.shadow) + " (" + r.t.copyColumns() + ") SELECT " +
		r.t.copyColumns() + " FROM " + r.t.name() + " WHERE "
	order := " ORDER BY " + r.t.keyList()
	for w := 0; w < r.p.opts.Workers; w++ {
		c, err := r.connect(ctx)
		if err != nil {
			fail(err)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for kr := range ranges {
				if r.rec.gate.wait(ctx) != nil {
					continue // drain
				}
				res, err := c.Execute(insert + r.t.rangeCond(kr) + order)
				if err != nil {
					fail(err)
					continue
				}
				r.rec.rowsDone.Add(int64(res.AffectedRows))
			}
		}()
	}
	walkErr := r.walk(ctx, r.conn, ranges)
	close(ranges)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if walkErr != nil {
		return walkErr
	}
	return ctx.Err()
}

// walk cuts the table's key into ranges of ChunkRows rows, in key order,
// and sends them to out until the end of the table, which the last range
// leaves open.
func (r *runner) walk(ctx context.Context, c *client.Conn, out chan<- keyRange) error {
	var lo []string
	for {
		where := ""
		if lo != nil {
			where = " WHERE " + r.t.keyCompare(">", lo)
		}
		res, err := c.Execute("SELECT " + r.t.keyList() + " FROM " + r.t.name() + where +
			" ORDER BY " + r.t.keyList() + " LIMIT 1 OFFSET " + strconv.Itoa(r.p.opts.ChunkRows-1))
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
		select {
		case out <- keyRange{lo, hi}:
		case <-ctx.Done():
			return ctx.Err()
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
