package eval

import (
	"sort"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// String indexes. Every string column whose collation the proxy compares
// may get a sorted index of its rows (NULLs left out), ordered by the
// collation, so that lookups by a string (a code, a name) narrow the rows
// to examine as integer indexes do. An entry is only a row number: keys
// are computed again while searching, which costs a few comparisons per
// lookup and no memory beyond four bytes a row.
//
// Sorting a column by its collation costs far more than loading it, and
// most string columns are never looked up: a column's index is built by
// the first lookup that needs it, once per snapshot. Its memory is
// counted when the table loads, so the cap is checked then.

// lazyIndex is one string column's index, built on first use.
type lazyIndex struct {
	once sync.Once
	rows []int32 // nil: the column could not be indexed
	// rank[i] is row i's place in the collation's order (equal values
	// share one), so that ORDER BY compares two numbers instead of two
	// sort keys; maxKey and maxValue are the longest sort key and value
	// in bytes, for the max_sort_length check.
	rank             []int32
	maxKey, maxValue int
}

// ReserveStringIndexes prepares the string indexes and counts their
// memory (after LearnCollations).
func (s *Snapshot) ReserveStringIndexes() {
	s.strIndex = make([]lazyIndex, len(s.Fields))
	for _, coll := range s.Colls {
		if coll != nil {
			s.Bytes += int64(len(s.Rows)) * 8 // rows and rank
		}
	}
}

// built returns column c's index, building it on first use; nil when
// the column has none.
func (s *Snapshot) built(c int) *lazyIndex {
	if s.strIndex == nil || s.Colls[c] == nil {
		return nil
	}
	li := &s.strIndex[c]
	li.once.Do(func() { s.buildStringIndex(c, li) })
	if li.rows == nil {
		return nil
	}
	return li
}

// stringIndex returns the index of string column c, building it on first
// use; nil when the column has none.
func (s *Snapshot) stringIndex(c int) []int32 {
	if li := s.built(c); li != nil {
		return li.rows
	}
	return nil
}

// buildStringIndex sorts the rows with a value in column c by its
// collation into li; it leaves li.rows nil if a value has a character
// whose weight is not known.
func (s *Snapshot) buildStringIndex(c int, li *lazyIndex) {
	coll := s.Colls[c]
	r := &RowCtx{snap: s}
	type entry struct {
		key []byte
		row int32
	}
	entries := make([]entry, 0, len(s.Rows))
	maxKey, maxValue := 0, 0
	for i, row := range s.Rows {
		if !r.SetRow(row) {
			return
		}
		v, null, _ := r.Field(c)
		if null {
			continue
		}
		k, known := coll.key(nil, v)
		if !known {
			return
		}
		maxKey, maxValue = max(maxKey, len(k)), max(maxValue, len(v))
		entries = append(entries, entry{k, int32(i)})
	}
	sort.SliceStable(entries, func(a, b int) bool { return coll.compareKeys(entries[a].key, entries[b].key) < 0 })
	idx := make([]int32, len(entries))
	rank := make([]int32, len(s.Rows))
	var n int32
	for i, e := range entries {
		idx[i] = e.row
		if i > 0 && coll.compareKeys(entries[i-1].key, e.key) != 0 {
			n++
		}
		rank[e.row] = n
	}
	li.rows, li.rank, li.maxKey, li.maxValue = idx, rank, maxKey, maxValue
}

// ranks returns column c's ranks when they may stand for its values in
// an ORDER BY under env (every value within max_sort_length), else nil.
func (s *Snapshot) ranks(c int, env RunEnv) []int32 {
	li := s.built(c)
	if li == nil || li.maxKey > env.MaxSortLength || li.maxValue > env.MaxSortLength/4 {
		return nil
	}
	return li.rank
}

// strSpan returns the rows whose value of string column col lies between
// lo and hi under the column's collation (nil bounds are open; loIncl and
// hiIncl say whether the bounds are included), in primary-key order.
func (s *Snapshot) strSpan(col int, lo, hi []byte, loIncl, hiIncl bool) ([]int, bool) {
	idx := s.stringIndex(col)
	if idx == nil {
		return nil, false
	}
	coll := s.Colls[col]
	r := &RowCtx{snap: s, offs: make([]int, 0, len(s.Fields)+1)}
	var kl, kh, buf []byte
	ok := true
	if lo != nil {
		kl, ok = coll.key(nil, lo)
	}
	if hi != nil && ok {
		kh, ok = coll.key(nil, hi)
	}
	if !ok {
		return nil, false
	}
	// cmpAt compares row idx[i]'s value with k.
	cmpAt := func(i int, k []byte) int {
		r.SetRow(s.Rows[idx[i]])
		v, _, _ := r.Field(col)
		buf, _ = coll.key(buf[:0], v)
		return coll.compareKeys(buf, k)
	}
	a, b := 0, len(idx)
	if lo != nil {
		a = sort.Search(len(idx), func(i int) bool {
			c := cmpAt(i, kl)
			return c > 0 || c == 0 && loIncl
		})
	}
	if hi != nil {
		b = sort.Search(len(idx), func(i int) bool {
			c := cmpAt(i, kh)
			return c > 0 || c == 0 && !hiIncl
		})
	}
	if b < a {
		b = a
	}
	rows := make([]int, 0, b-a)
	for _, i := range idx[a:b] {
		rows = append(rows, int(i))
	}
	sort.Ints(rows)
	return rows, true
}

// narrowString narrows a condition on a string column through its index.
func (p *Plan) narrowString(e expr, snap *Snapshot, r *RowCtx) ([]int, bool) {
	// value returns a string operand, whether it is NULL, and whether it
	// can be compared in-proxy with column col.
	value := func(col int, o operand) ([]byte, bool, bool) {
		v, null := r.strOperand(o)
		if null {
			return nil, true, true
		}
		return v, false, r.env.usable(snap.Colls[col], v)
	}
	switch x := e.(type) {
	case strCmpExpr:
		v, null, ok := value(x.col, x.val)
		switch {
		case !ok || x.op == opcode.NE:
			return nil, false
		case null:
			return nil, true // compared with NULL: no row
		}
		switch x.op {
		case opcode.EQ:
			return snap.strSpan(x.col, v, v, true, true)
		case opcode.GT, opcode.GE:
			return snap.strSpan(x.col, v, nil, x.op == opcode.GE, false)
		case opcode.LT, opcode.LE:
			return snap.strSpan(x.col, nil, v, false, x.op == opcode.LE)
		}
	case strInExpr:
		if x.not {
			return nil, false
		}
		var rows []int
		for _, o := range x.list {
			v, null, ok := value(x.col, o)
			if !ok {
				return nil, false
			}
			if null {
				continue // NULL in the list matches no row
			}
			s, ok := snap.strSpan(x.col, v, v, true, true)
			if !ok {
				return nil, false
			}
			rows = append(rows, s...)
		}
		return rows, true
	case strBetweenExpr:
		if x.not {
			return nil, false
		}
		lo, nl, okl := value(x.col, x.lo)
		hi, nh, okh := value(x.col, x.hi)
		if !okl || !okh || nl || nh {
			return nil, false
		}
		return snap.strSpan(x.col, lo, hi, true, true)
	}
	return nil, false
}
