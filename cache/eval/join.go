package eval

import "github.com/pingcap/tidb/pkg/parser/opcode"

// Inner joins of two cached tables. A join is answered as a single-table
// plan over the joined rows: each is the two tables' text-protocol rows
// side by side (the protocol's rows are their values one after another, so
// two rows put together are a row of the joined columns), in a snapshot
// built for the statement. Equality conditions between integer columns
// of the two tables pick the matching rows of the second table through its
// index; otherwise every pair is formed, up to maxJoinPairs.

// maxJoinPairs bounds the pairs of rows one join may form; a larger join
// goes to the backend.
const maxJoinPairs = 1 << 16

// joinSpec is how a plan joins its two tables.
type joinSpec struct {
	// eq are equality conditions between an integer column of the first
	// table and one of the second (joined column numbers), from the
	// top-level conjuncts of WHERE and ON (of ON only, for a LEFT JOIN).
	eq [][2]int
	// left: a LEFT JOIN, whose ON (on) chooses the rows of the second
	// table to join, and whose rows of the first table that match none
	// are joined to NULLs.
	left bool
	on   expr
}

// JoinSnapshot is a snapshot of the columns of a and b side by side, with
// rows (nil when only planning).
func JoinSnapshot(a, b *Snapshot, rows [][]byte) *Snapshot {
	off := len(a.Fields)
	s := &Snapshot{ID: a.ID, Version: a.Version, Rows: rows, LoadedAt: a.LoadedAt}
	s.Fields = append(append(s.Fields, a.Fields...), b.Fields...)
	s.PK = append(s.PK, a.PK...)
	for _, c := range b.PK {
		s.PK = append(s.PK, c+off)
	}
	s.ASCII = append(append(s.ASCII, a.ASCII...), b.ASCII...)
	s.BMP = append(append(s.BMP, a.BMP...), b.BMP...)
	s.Colls = make([]*Collation, 0, len(s.Fields))
	for _, x := range []*Snapshot{a, b} {
		if x.Colls == nil {
			s.Colls = append(s.Colls, make([]*Collation, len(x.Fields))...)
		} else {
			s.Colls = append(s.Colls, x.Colls...)
		}
	}
	s.Layout = a.Layout + "\x00" + b.Layout
	return s
}

// equiJoin finds the conditions t1.x = t2.y among where's top-level
// conjuncts, for columns of the first table (< off) and the second.
func equiJoin(where expr, off int) [][2]int {
	var eq [][2]int
	var visit func(e expr)
	visit = func(e expr) {
		switch x := e.(type) {
		case andExpr:
			visit(x.l)
			visit(x.r)
		case cmpExpr:
			if x.op != opcode.EQ || x.l.kind != opColumn || x.r.kind != opColumn {
				return
			}
			l, r := x.l.col, x.r.col
			if l >= off {
				l, r = r, l
			}
			if l < off && r >= off {
				eq = append(eq, [2]int{l, r})
			}
		}
	}
	visit(where)
	return eq
}

// JoinRows forms the joined rows of a and b that the plan's equality
// conditions allow (and, for a LEFT JOIN, its ON), in a's primary-key
// order, then b's.
func (p *Plan) JoinRows(a, b *Snapshot, args []Arg, env RunEnv) ([][]byte, Why) {
	off := len(a.Fields)
	var key [2]int
	useIndex := false
	for _, e := range p.Join.eq {
		if indexed(b, e[1]-off) {
			key, useIndex = e, true
			break
		}
	}
	all := make([]int, len(b.Rows))
	for i := range all {
		all[i] = i
	}
	r := &RowCtx{snap: a, offs: make([]int, 0, len(a.Fields)+1)}
	var on *RowCtx // evaluates a LEFT JOIN's ON on a joined row
	var nulls []byte
	if p.Join.left {
		on = &RowCtx{snap: JoinSnapshot(a, b, nil), args: args, env: env, offs: make([]int, 0, len(a.Fields)+len(b.Fields)+1)}
		nulls = make([]byte, len(b.Fields))
		for i := range nulls {
			nulls[i] = 0xfb // NULL in a text-protocol row
		}
	}
	var out [][]byte
	budget := maxJoinPairs
	for _, ra := range a.Rows {
		cand := all
		if useIndex {
			if !r.SetRow(ra) {
				return nil, Because(UnreadableRow, "a stored row could not be read")
			}
			v, null, _ := r.Field(key[0])
			n, ok := parseNum(v)
			switch {
			case null:
				cand = nil // NULL equals nothing
			case !ok:
				return nil, Because(UnreadableRow, "a stored row could not be read")
			default:
				cand, _ = span(b, key[1]-off, &n, &n)
			}
		}
		if budget -= len(cand); budget < 0 {
			return nil, Because(TooManyRows, "the join would pair more than 65536 rows: the backend has indexes")
		}
		matched := false
		for _, j := range cand {
			row := make([]byte, 0, len(ra)+len(b.Rows[j]))
			row = append(append(row, ra...), b.Rows[j]...)
			if on != nil {
				if !on.SetRow(row) {
					return nil, Because(UnreadableRow, "a stored row could not be read")
				}
				t := p.Join.on.eval(on)
				if on.fail {
					return nil, on.failure()
				}
				if t != triTrue {
					continue
				}
			}
			matched = true
			out = append(out, row)
		}
		if on != nil && !matched {
			row := make([]byte, 0, len(ra)+len(nulls))
			out = append(out, append(append(row, ra...), nulls...))
		}
	}
	return out, Why{}
}
