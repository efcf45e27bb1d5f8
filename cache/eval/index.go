package eval

import (
	"sort"

	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Secondary lookups. Every integer column of a snapshot gets a sorted
// index of (value, row), so that a condition on such a column narrows the
// rows to examine instead of scanning the table: without it, a query the
// backend answers from an index would be slower from memory than from the
// backend. The index only chooses candidate rows; every candidate is still
// checked against the whole condition, so a wrong index could cost
// speed, never correctness.

// indexEntry is one row's value in a column index.
type indexEntry struct {
	v   num
	row int32
}

// maxScanRows is the most rows a plan may examine one by one; a query that
// no index narrows below it goes to the backend, which has its own indexes.
const maxScanRows = 1024

// BuildIndexes indexes every integer column except a single-column
// primary key (whose order the rows already have).
func (s *Snapshot) BuildIndexes() {
	s.index = make([][]indexEntry, len(s.Fields))
	r := &RowCtx{snap: s}
	for c, f := range s.Fields {
		if !isInteger(f) || (len(s.PK) == 1 && s.PK[0] == c) {
			continue
		}
		idx := make([]indexEntry, 0, len(s.Rows))
		for i, row := range s.Rows {
			if !r.SetRow(row) {
				return
			}
			v, null, _ := r.Field(c)
			if null {
				continue // NULL matches no comparison, IN or BETWEEN
			}
			n, ok := parseNum(v)
			if !ok {
				idx = nil
				break
			}
			idx = append(idx, indexEntry{v: n, row: int32(i)})
		}
		if idx == nil {
			continue
		}
		sort.SliceStable(idx, func(a, b int) bool { return idx[a].v.Cmp(idx[b].v) < 0 })
		s.index[c] = idx
		s.Bytes += int64(len(idx)) * 32
	}
}

// lookup returns the index entries with lo <= v <= hi (either bound may be
// open).
func lookup(idx []indexEntry, lo, hi *num) []indexEntry {
	a, b := 0, len(idx)
	if lo != nil {
		a = sort.Search(len(idx), func(i int) bool { return idx[i].v.Cmp(*lo) >= 0 })
	}
	if hi != nil {
		b = sort.Search(len(idx), func(i int) bool { return idx[i].v.Cmp(*hi) > 0 })
	}
	if b < a {
		b = a
	}
	return idx[a:b]
}

// candidates returns the rows the condition can match at most, in
// primary-key order, when indexes narrow it: a comparison, IN list or
// BETWEEN on an indexed column or the integer primary key; the smaller
// side of an AND; the union of both sides of an OR. ok is false when the
// condition is not narrowed.
func (p *Plan) candidates(snap *Snapshot, r *RowCtx) (rows []int, ok bool) {
	if p.where == nil {
		return nil, false
	}
	rows, ok = p.narrow(p.where, snap, r)
	if !ok {
		return nil, false
	}
	sort.Ints(rows)
	out := rows[:0]
	for i, v := range rows {
		if i == 0 || v != rows[i-1] {
			out = append(out, v)
		}
	}
	return out, true
}

// indexed reports whether span can look up column col.
func indexed(snap *Snapshot, col int) bool {
	if len(snap.PK) == 1 && snap.PK[0] == col && len(snap.pkNums) == len(snap.Rows) {
		return true
	}
	return snap.index != nil && snap.index[col] != nil
}

// span is the rows whose indexed value lies in [lo, hi] (nil bounds are
// open) for column col.
func span(snap *Snapshot, col int, lo, hi *num) ([]int, bool) {
	if len(snap.PK) == 1 && snap.PK[0] == col && len(snap.pkNums) == len(snap.Rows) {
		a, b := 0, len(snap.Rows)
		if lo != nil {
			a = snap.lowerBound(*lo)
		}
		if hi != nil {
			b = snap.upperBound(*hi)
		}
		rows := make([]int, 0, max(b-a, 0))
		for i := a; i < b; i++ {
			rows = append(rows, i)
		}
		return rows, true
	}
	if snap.index == nil || snap.index[col] == nil {
		return nil, false
	}
	es := lookup(snap.index[col], lo, hi)
	rows := make([]int, len(es))
	for i, e := range es {
		rows[i] = int(e.row)
	}
	return rows, true
}

func (p *Plan) narrow(e expr, snap *Snapshot, r *RowCtx) ([]int, bool) {
	switch x := e.(type) {
	case strCmpExpr, strInExpr, strBetweenExpr:
		return p.narrowString(x, snap, r)
	case andExpr:
		l, okl := p.narrow(x.l, snap, r)
		rr, okr := p.narrow(x.r, snap, r)
		switch {
		case okl && okr:
			if len(rr) < len(l) {
				return rr, true
			}
			return l, true
		case okl:
			return l, true
		case okr:
			return rr, true
		}
	case orExpr:
		l, okl := p.narrow(x.l, snap, r)
		if !okl {
			return nil, false
		}
		rr, okr := p.narrow(x.r, snap, r)
		if !okr {
			return nil, false
		}
		return append(l, rr...), true
	case cmpExpr:
		col, val, op := x.l, x.r, x.op
		if col.kind != opColumn {
			col, val, op = x.r, x.l, flip(op)
		}
		if col.kind != opColumn || !val.constant() || op == opcode.NE {
			return nil, false
		}
		v, ok := r.operand(val)
		if !ok {
			return nil, indexed(snap, col.col) // compared with NULL: no row
		}
		switch op {
		case opcode.EQ:
			return span(snap, col.col, &v, &v)
		case opcode.GE, opcode.GT:
			return span(snap, col.col, &v, nil)
		case opcode.LE, opcode.LT:
			return span(snap, col.col, nil, &v)
		}
	case inExpr:
		if x.not || x.x.kind != opColumn || !indexed(snap, x.x.col) {
			return nil, false
		}
		var rows []int
		for _, o := range x.list {
			v, ok := r.operand(o)
			if !ok {
				continue // NULL in the list matches no row
			}
			s, _ := span(snap, x.x.col, &v, &v)
			rows = append(rows, s...)
		}
		return rows, true
	case betweenExpr:
		if x.not || x.x.kind != opColumn {
			return nil, false
		}
		l, okl := r.operand(x.lo)
		h, okh := r.operand(x.hi)
		if !okl || !okh {
			return nil, indexed(snap, x.x.col) // a NULL bound: no row
		}
		return span(snap, x.x.col, &l, &h)
	}
	return nil, false
}
