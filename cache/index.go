package cache

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

// buildIndexes indexes every integer column except a single-column
// primary key (whose order the rows already have).
func (s *Snapshot) buildIndexes() {
	s.index = make([][]indexEntry, len(s.Fields))
	r := &rowCtx{snap: s}
	for c, f := range s.Fields {
		if !isInteger(f) || (len(s.PK) == 1 && s.PK[0] == c) {
			continue
		}
		idx := make([]indexEntry, 0, len(s.Rows))
		for i, row := range s.Rows {
			if !r.setRow(row) {
				return
			}
			v, null, _ := r.field(c)
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
		sort.SliceStable(idx, func(a, b int) bool { return idx[a].v.cmp(idx[b].v) < 0 })
		s.index[c] = idx
		s.Bytes += int64(len(idx)) * 32
	}
}

// lookup returns the index entries with lo <= v <= hi (either bound may be
// open).
func lookup(idx []indexEntry, lo, hi *num) []indexEntry {
	a, b := 0, len(idx)
	if lo != nil {
		a = sort.Search(len(idx), func(i int) bool { return idx[i].v.cmp(*lo) >= 0 })
	}
	if hi != nil {
		b = sort.Search(len(idx), func(i int) bool { return idx[i].v.cmp(*hi) > 0 })
	}
	if b < a {
		b = a
	}
	return idx[a:b]
}

// candidates picks, among the condition's top-level conjuncts on indexed
// columns, the one that matches the fewest rows, and returns those rows in
// primary-key order. ok is false when no conjunct narrows the scan.
func (p *plan) candidates(snap *Snapshot, r *rowCtx) (rows []int, ok bool) {
	best := -1
	var bestSets [][]indexEntry
	consider := func(sets [][]indexEntry) {
		n := 0
		for _, s := range sets {
			n += len(s)
		}
		if best < 0 || n < best {
			best, bestSets = n, sets
		}
	}
	var visit func(e expr)
	visit = func(e expr) {
		switch x := e.(type) {
		case andExpr:
			visit(x.l)
			visit(x.r)
		case cmpExpr:
			col, val, op := x.l, x.r, x.op
			if col.kind != opColumn {
				col, val, op = x.r, x.l, flip(op)
			}
			if col.kind != opColumn || val.kind == opColumn || snap.index[col.col] == nil || op == opcode.NE {
				return
			}
			v, ok := r.operand(val)
			if !ok {
				consider(nil) // compared with NULL: no row
				return
			}
			idx := snap.index[col.col]
			switch op {
			case opcode.EQ:
				consider([][]indexEntry{lookup(idx, &v, &v)})
			case opcode.GE, opcode.GT:
				consider([][]indexEntry{lookup(idx, &v, nil)})
			case opcode.LE, opcode.LT:
				consider([][]indexEntry{lookup(idx, nil, &v)})
			}
		case inExpr:
			if x.not || x.x.kind != opColumn || snap.index[x.x.col] == nil {
				return
			}
			idx := snap.index[x.x.col]
			var sets [][]indexEntry
			seen := map[num]bool{}
			for _, o := range x.list {
				v, ok := r.operand(o)
				if !ok || seen[v] {
					continue // NULL in the list matches no row
				}
				seen[v] = true
				sets = append(sets, lookup(idx, &v, &v))
			}
			consider(sets)
		case betweenExpr:
			if x.not || snap.index[x.x.col] == nil {
				return
			}
			l, okl := r.operand(x.lo)
			h, okh := r.operand(x.hi)
			if !okl || !okh {
				consider(nil)
				return
			}
			consider([][]indexEntry{lookup(snap.index[x.x.col], &l, &h)})
		}
	}
	if p.where != nil {
		visit(p.where)
	}
	if best < 0 {
		return nil, false
	}
	rows = make([]int, 0, best)
	for _, s := range bestSets {
		for _, e := range s {
			rows = append(rows, int(e.row))
		}
	}
	sort.Ints(rows)
	// IN lists with equal values after conversion can repeat a row.
	out := rows[:0]
	for i, v := range rows {
		if i == 0 || v != rows[i-1] {
			out = append(out, v)
		}
	}
	return out, true
}
