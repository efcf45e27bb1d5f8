package eval

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"tableproxy/internal/mysqlwire"
)

// RowCtx evaluates a plan's condition on one row.
type RowCtx struct {
	snap *Snapshot
	row  []byte
	offs []int // start of each field's length prefix, plus the row's end
	args []Arg
	env  RunEnv
	// fail is set when a value cannot be compared exactly: the statement
	// goes to the backend.
	fail   bool
	k1, k2 []byte // scratch for sort keys
}

// RunEnv is what a run needs to know of the session.
type RunEnv struct {
	// ASCIIArgs: the client and connection character sets encode ASCII
	// as ASCII; UTF8Args: both are utf8mb4.
	ASCIIArgs, UTF8Args bool
	// DefaultParse: the session's sql_mode parses statements as the
	// proxy's parser does.
	DefaultParse bool
	// TZOffset is the session time zone's offset from UTC in seconds,
	// when it is fixed (TZFixed).
	TZOffset int
	TZFixed  bool
	// NoUnsignedSubtraction: sql_mode has NO_UNSIGNED_SUBTRACTION.
	NoUnsignedSubtraction bool
	// DivPrecision is @@div_precision_increment: the scale of AVG of
	// integers.
	DivPrecision int
	// MaxSortLength is @@max_sort_length: the backend sorts by at most
	// this many bytes of each value's sort key.
	MaxSortLength int
	// PlainValues: the sql_mode leaves values as stored (see package
	// cache's plainValues).
	PlainValues bool
}

// arg is a bound parameter: an integer, a string or NULL.
type Arg struct {
	Null bool
	V    num
	Str  bool   // a string (s), not an integer (v)
	S    []byte // the string, as sent
	// bound: a parameter bound to a prepared statement (whose type the
	// backend infers), not a literal of a statement's text.
	bound bool
}

// SetRow points the context at a row and indexes its fields.
func (r *RowCtx) SetRow(row []byte) bool {
	r.row = row
	r.offs = r.offs[:0]
	pos := 0
	for range r.snap.Fields {
		r.offs = append(r.offs, pos)
		if pos >= len(row) {
			return false
		}
		if row[pos] == 0xfb { // NULL
			pos++
			continue
		}
		_, n, ok := mysqlwire.ReadLenEncString(row[pos:])
		if !ok {
			return false
		}
		pos += n
	}
	r.offs = append(r.offs, pos)
	return true
}

// field returns column i's value (nil, true for NULL) and its encoded form
// (length prefix included) as the text protocol carries it.
func (r *RowCtx) Field(i int) (val []byte, null bool, raw []byte) {
	raw = r.row[r.offs[i]:r.offs[i+1]]
	if raw[0] == 0xfb {
		return nil, true, raw
	}
	v, _, _ := mysqlwire.ReadLenEncString(raw)
	return v, false, raw
}

func (r *RowCtx) operand(o operand) (num, bool) {
	switch o.kind {
	case opColumn:
		v, null, _ := r.Field(o.col)
		if null {
			return num{}, false
		}
		n, ok := parseNum(v)
		return n, ok
	case opLiteral:
		return o.val, true
	case opParam:
		if o.param >= len(r.args) || r.args[o.param].Null {
			return num{}, false
		}
		if o.negate {
			return r.args[o.param].V.negated(), true
		}
		return r.args[o.param].V, true
	case opArith:
		return r.arith(o)
	}
	return num{}, false
}

func (e cmpExpr) eval(r *RowCtx) tri {
	l, okl := r.operand(e.l)
	rr, okr := r.operand(e.r)
	if !okl || !okr {
		return triNull
	}
	return cmpResult(e.op, l.Cmp(rr))
}

func (e andExpr) eval(r *RowCtx) tri {
	l := e.l.eval(r)
	if l == triFalse {
		return triFalse
	}
	rr := e.r.eval(r)
	switch {
	case rr == triFalse:
		return triFalse
	case l == triNull || rr == triNull:
		return triNull
	}
	return triTrue
}

func (e orExpr) eval(r *RowCtx) tri {
	l := e.l.eval(r)
	if l == triTrue {
		return triTrue
	}
	rr := e.r.eval(r)
	switch {
	case rr == triTrue:
		return triTrue
	case l == triNull || rr == triNull:
		return triNull
	}
	return triFalse
}

func (e notExpr) eval(r *RowCtx) tri { return triNot(e.e.eval(r)) }

func (e isNullExpr) eval(r *RowCtx) tri {
	_, null, _ := r.Field(e.col)
	if null != e.not {
		return triTrue
	}
	return triFalse
}

func (e inExpr) eval(r *RowCtx) tri {
	x, ok := r.operand(e.x)
	if !ok {
		return triNull
	}
	res := triFalse
	for _, o := range e.list {
		v, ok := r.operand(o)
		if !ok {
			res = triNull
			continue
		}
		if x.Cmp(v) == 0 {
			res = triTrue
			break
		}
	}
	if e.not {
		return triNot(res)
	}
	return res
}

func (e betweenExpr) eval(r *RowCtx) tri {
	ge := cmpExpr{op: opcode.GE, l: e.x, r: e.lo}.eval(r)
	le := cmpExpr{op: opcode.LE, l: e.x, r: e.hi}.eval(r)
	res := andExpr{constTri(ge), constTri(le)}.eval(r)
	if e.not {
		return triNot(res)
	}
	return res
}

type constTri tri

func (c constTri) eval(*RowCtx) tri { return tri(c) }

// reuse readies r, scratch kept from statement to statement, for rows of
// snap: only its offsets' storage survives.
func (r *RowCtx) Reuse(snap *Snapshot, args []Arg, env RunEnv) *RowCtx {
	*r = RowCtx{snap: snap, args: args, env: env, offs: r.offs[:0]}
	return r
}

// release drops what r refers to, so that scratch kept by an idle session
// holds no snapshot (an old version of a table) in memory.
func (r *RowCtx) Release() { r.Reuse(nil, nil, RunEnv{}) }

// run selects the plan's rows from the snapshot r is set up for (see
// reuse): their indexes, in output order, appended to into[:0]. why says,
// when the answer cannot be computed exactly here, why not.
func (p *Plan) Run(r *RowCtx, into []int) (rows []int, why Why) {
	snap := r.snap
	if len(p.whereArith) > 0 {
		if why := p.checkArith(r); why.Declined() {
			return nil, why
		}
	}
	lo, hi, exact := p.scanRange(snap, r)
	out := into[:0]
	check := func(i int) bool {
		if !r.SetRow(snap.Rows[i]) {
			return false
		}
		if p.where == nil || p.where.eval(r) == triTrue {
			out = append(out, i)
		}
		return !r.fail
	}
	if exact && p.Join == nil {
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
	} else if cand, ok := p.candidates(snap, r); ok && len(cand) < hi-lo {
		for _, i := range cand {
			if i >= lo && i < hi && !check(i) {
				return nil, r.failure()
			}
		}
	} else {
		if p.where != nil && hi-lo > maxScanRows && p.Join == nil { // (a join's rows are bounded by maxJoinPairs)
			return nil, Because(TooManyRows, "more than 1024 rows to examine and no index narrows them: the backend has indexes")
		}
		for i := lo; i < hi; i++ {
			if !check(i) {
				return nil, r.failure()
			}
		}
	}
	if len(p.order) > 0 {
		if out, why = p.sortRows(r, out); why.Declined() {
			return nil, why
		}
	}
	if len(p.Aggs) == 0 && p.groupBy == nil {
		from, to, why := p.window(r, len(out))
		if why.Declined() {
			return nil, why
		}
		out = out[from:to]
	}
	return out, Why{}
}

// PlainRows reports whether the plan's answer is the selected rows'
// columns as stored (no arithmetic, aggregate or group to compute).
func (p *Plan) PlainRows() bool {
	return !p.Computed && p.groupBy == nil && len(p.Aggs) == 0
}

// ValueRows computes the answer of a plan whose rows are not plain (see
// PlainRows) from the rows run selected: values as the text protocol
// prints them, nil for NULL; or why it cannot be computed exactly.
func (p *Plan) ValueRows(snap *Snapshot, rows []int, args []Arg, env RunEnv) ([][][]byte, Why) {
	switch {
	case p.Computed:
		return p.computeRows(snap, rows, args, env)
	case p.groupBy != nil:
		return p.groups(snap, rows, args, env)
	}
	vals, ok := p.aggregate(snap, rows, env)
	shown, ok2 := p.aggregateRowShown(args)
	if !ok || !ok2 {
		return nil, Because(InexactAggregate, "an aggregate's value could not be computed exactly")
	}
	if !shown {
		return nil, Why{}
	}
	return [][][]byte{vals}, Why{}
}

// ZeroLimit reports whether the statement has LIMIT 0, which the backend
// answers without reading the table (so without index-use status bits).
func (p *Plan) ZeroLimit(args []Arg) bool {
	if p.limit.kind == opNone {
		return false
	}
	var r RowCtx
	r.args = args
	n, ok := r.operand(p.limit)
	return ok && !n.neg && n.mag == 0
}

// window applies LIMIT and OFFSET to n results: the range to keep.
func (p *Plan) window(r *RowCtx, n int) (from, to int, why Why) {
	if p.limit.kind == opNone {
		return 0, n, Why{}
	}
	count, ok := r.operand(p.limit)
	if !ok || count.neg {
		return 0, 0, Because(BadLimit, "LIMIT or OFFSET is negative or NULL")
	}
	off := num{}
	if p.offset.kind != opNone {
		if off, ok = r.operand(p.offset); !ok || off.neg {
			return 0, 0, Because(BadLimit, "LIMIT or OFFSET is negative or NULL")
		}
	}
	if off.mag >= uint64(n) {
		return n, n, Why{}
	}
	from = int(off.mag)
	to = n
	if count.mag < uint64(n-from) {
		to = from + int(count.mag)
	}
	return from, to, Why{}
}

// groups computes a GROUP BY's result rows from the matching rows, sorted
// by the group columns: one row per group, values as the text protocol
// prints them (nil for NULL), after LIMIT and OFFSET.
func (p *Plan) groups(snap *Snapshot, rows []int, args []Arg, env RunEnv) ([][][]byte, Why) {
	r := &RowCtx{snap: snap, args: args, env: env, offs: make([]int, 0, len(snap.Fields)+1)}
	first := &RowCtx{snap: snap, offs: make([]int, 0, len(snap.Fields)+1)}
	var out [][][]byte
	for start := 0; start < len(rows); {
		if !first.SetRow(snap.Rows[rows[start]]) {
			return nil, Because(UnreadableRow, "a stored row could not be read")
		}
		end := start + 1
		for ; end < len(rows); end++ {
			if !r.SetRow(snap.Rows[rows[end]]) {
				return nil, Because(UnreadableRow, "a stored row could not be read")
			}
			same, bytesToo, ok := sameGroup(first, r, p.groupBy)
			if !ok {
				return nil, Because(InexactString, "a group value has a character whose weight is not known")
			}
			if !same {
				break
			}
			if !bytesToo {
				return nil, Because(CollationTies, "GROUP BY: values equal by collation but not byte for byte; which one the backend shows is its choice")
			}
		}
		vals, ok := p.aggregate(snap, rows[start:end], env)
		if !ok {
			return nil, Because(InexactAggregate, "an aggregate's value could not be computed exactly")
		}
		row := make([][]byte, len(p.Items))
		for j, it := range p.Items {
			if it.Agg >= 0 {
				row[j] = vals[it.Agg]
				continue
			}
			v, null, _ := first.Field(it.Col)
			if !null {
				row[j] = append([]byte{}, v...)
			}
		}
		out = append(out, row)
		start = end
	}
	from, to, why := p.window(r, len(out))
	if why.Declined() {
		return nil, why
	}
	return out[from:to], Why{}
}

// sameGroup reports whether two rows fall in one group of cols (NULLs
// group together; strings by collation), and whether their values are
// also the same bytes.
func sameGroup(a, b *RowCtx, cols []int) (same, bytesToo, ok bool) {
	bytesToo = true
	for _, c := range cols {
		va, na, _ := a.Field(c)
		vb, nb, _ := b.Field(c)
		if na || nb {
			if na != nb {
				return false, false, true
			}
			continue
		}
		if bytes.Equal(va, vb) {
			continue
		}
		bytesToo = false
		coll := a.snap.Colls[c]
		if coll == nil {
			return false, false, true // integers print one way
		}
		ka, ok1 := coll.key(nil, va)
		kb, ok2 := coll.key(nil, vb)
		if !ok1 || !ok2 {
			return false, false, false
		}
		if coll.compareKeys(ka, kb) != 0 {
			return false, false, true
		}
	}
	return true, bytesToo, true
}

// failure says why a row could not be evaluated.
func (r *RowCtx) failure() Why {
	if r.fail {
		return Because(InexactString, "a string could not be compared exactly (a character whose weight is not known, a conversion between character sets, or a LIKE escape)")
	}
	return Because(UnreadableRow, "a stored row could not be read")
}

// sortKey is one ORDER BY value of a row.
type sortKey struct {
	null bool
	n    num    // integer columns
	w    []byte // string columns: the collation's sort key
}

// sortPacked sorts perm (0, 1, 2, ... on entry) by one numeric key per
// position as a stable sort would, in one slices.Sort of integers: each
// holds the key (NULL lowest, mirrored for DESC) in its high 32 bits and the
// position in its low 32, so that tied keys keep their order. ORDER BY on
// one ranked string column (sysbench's ORDER BY c) comes here, several
// times faster than sorting positions through a comparison function. It
// reports false, leaving perm as it was, when a key is negative or does not
// fit in 31 bits.
func sortPacked(perm []int, keys []sortKey, desc bool) bool {
	if len(perm) >= 1<<32 {
		return false
	}
	packed := make([]uint64, len(perm))
	for n := range packed {
		k := &keys[n]
		var v uint64 // NULL
		if !k.null {
			if k.n.neg || k.n.mag >= 1<<31 {
				return false
			}
			v = k.n.mag + 1
		}
		if desc {
			v = 1<<32 - 1 - v
		}
		packed[n] = v<<32 | uint64(n)
	}
	slices.Sort(packed)
	for n, x := range packed {
		perm[n] = int(uint32(x))
	}
	return true
}

// sortRows sorts rows by the plan's ORDER BY, NULLs first ascending as in
// MySQL. Unless the order is total, rows that tie make the answer the
// backend's to give (false); under DISTINCT, tied rows are duplicates and
// all but the first are dropped, if they are byte for byte the same.
func (p *Plan) sortRows(r *RowCtx, rows []int) ([]int, Why) {
	snap := r.snap
	m := len(p.order)
	// Keys are laid out by position in rows (m per row), string keys in
	// one arena; the sort permutes positions.
	keys := make([]sortKey, len(rows)*m)
	var arena []byte
	// A string column's ranks in its collation's order, where the
	// snapshot has them, stand for its values: numbers to compare.
	ranks := make([][]int32, m)
	for j, o := range p.order {
		if snap.Colls[o.col] != nil {
			ranks[j] = snap.ranks(o.col, r.env)
		}
	}
	for n, i := range rows {
		r.SetRow(snap.Rows[i])
		for j, o := range p.order {
			k := &keys[n*m+j]
			v, null, _ := r.Field(o.col)
			if null {
				k.null = true
				continue
			}
			if ranks[j] != nil {
				k.n = num{mag: uint64(ranks[j][i])}
				continue
			}
			if c := snap.Colls[o.col]; c != nil {
				start := len(arena)
				var ok bool
				arena, ok = c.key(arena, v)
				// The backend compares at most max_sort_length bytes of a
				// sort key, counted in its own units (a utf8mb4 character
				// reserves 4 bytes, whatever its length), and only when it
				// sorts rather than reads an index in order: a value that
				// might reach the limit makes the order the backend's.
				if !ok {
					return nil, Because(InexactString, "a value to sort by has a character whose weight is not known")
				}
				if len(arena)-start > r.env.MaxSortLength || len(v) > r.env.MaxSortLength/4 {
					return nil, Because(InexactString, "a value to sort by is longer than max_sort_length")
				}
				// (A full slice: a later append to the arena may move it,
				// never write over this key.)
				k.w = arena[start:len(arena):len(arena)]
				continue
			}
			var ok bool
			if k.n, ok = parseNum(v); !ok {
				return nil, Because(UnreadableRow, "a stored value could not be read")
			}
		}
	}
	cmp := func(a, b int) int {
		ka, kb := keys[a*m:a*m+m], keys[b*m:b*m+m]
		for j, o := range p.order {
			var c int
			switch {
			case ka[j].null && kb[j].null:
			case ka[j].null:
				c = -1
			case kb[j].null:
				c = 1
			case snap.Colls[o.col] != nil && ranks[j] == nil:
				c = snap.Colls[o.col].compareKeys(ka[j].w, kb[j].w)
			default:
				c = ka[j].n.Cmp(kb[j].n)
			}
			if o.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	perm := make([]int, len(rows))
	for n := range perm {
		perm[n] = n
	}
	if m != 1 || ranks[0] == nil && snap.Colls[p.order[0].col] != nil || !sortPacked(perm, keys, p.order[0].desc) {
		slices.SortStableFunc(perm, cmp)
	}
	if p.total && !p.distinct || p.groupBy != nil {
		// (Under GROUP BY, rows that tie are one group. Under DISTINCT
		// they are one row: a table without a primary key, a virtual
		// one, has an order that is total and may still tie.)
		for n, at := range perm {
			perm[n] = rows[at]
		}
		return perm, Why{}
	}
	out := make([]int, 0, len(rows))
	for n, at := range perm {
		if n == 0 || cmp(perm[n-1], at) != 0 {
			out = append(out, rows[at])
			continue
		}
		if !p.distinct {
			return nil, Because(OrderTies, "rows tie in the ORDER BY: their order is the backend's choice")
		}
		if !sameValues(r, p.Cols, snap.Rows[rows[perm[n-1]]], snap.Rows[rows[at]]) {
			return nil, Because(CollationTies, "DISTINCT: values are equal by collation but not byte for byte; which one the backend shows is its choice")
		}
	}
	return out, Why{}
}

// sameValues reports whether two rows hold the same bytes in cols.
func sameValues(r *RowCtx, cols []int, a, b []byte) bool {
	r2 := &RowCtx{snap: r.snap}
	if !r.SetRow(a) || !r2.SetRow(b) {
		return false
	}
	for _, c := range cols {
		_, _, x := r.Field(c)
		_, _, y := r2.Field(c)
		if !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// scanRange narrows the scan to a primary-key range when the condition's
// top-level conjuncts bound a single integer primary key. exact reports
// that the condition is nothing but such bounds: every row in the range
// matches, and none needs evaluating (the bounds compare integers exactly
// as cmpExpr and betweenExpr do, and a primary key is never NULL).
func (p *Plan) scanRange(snap *Snapshot, r *RowCtx) (lo, hi int, exact bool) {
	lo, hi = 0, len(snap.Rows)
	if len(snap.pkNums) != len(snap.Rows) || len(snap.PK) != 1 || p.where == nil {
		return lo, hi, false
	}
	exact = true
	pk := snap.PK[0]
	var visit func(e expr)
	visit = func(e expr) {
		switch x := e.(type) {
		case andExpr:
			visit(x.l)
			visit(x.r)
			return
		case cmpExpr:
			col, val, op := x.l, x.r, x.op
			if col.kind != opColumn {
				col, val, op = x.r, x.l, flip(op)
			}
			if col.kind != opColumn || col.col != pk || !val.constant() {
				break
			}
			v, ok := r.operand(val)
			if !ok {
				lo, hi = 0, 0 // pk compared with NULL: nothing matches
				return
			}
			switch op {
			case opcode.EQ:
				l, h := snap.equalRange(v)
				lo, hi = max(lo, l), min(hi, h)
			case opcode.GE:
				lo = max(lo, snap.lowerBound(v))
			case opcode.GT:
				lo = max(lo, snap.upperBound(v))
			case opcode.LE:
				hi = min(hi, snap.upperBound(v))
			case opcode.LT:
				hi = min(hi, snap.lowerBound(v))
			default:
				exact = false
			}
			return
		case betweenExpr:
			if x.not || x.x.col != pk {
				break
			}
			l, okl := r.operand(x.lo)
			h, okh := r.operand(x.hi)
			if !okl || !okh {
				lo, hi = 0, 0
				return
			}
			lo, hi = max(lo, snap.lowerBound(l)), min(hi, snap.upperBound(h))
			return
		}
		exact = false
	}
	visit(p.where)
	if hi < lo {
		hi = lo
	}
	return lo, hi, exact
}

func flip(op opcode.Op) opcode.Op {
	switch op {
	case opcode.LT:
		return opcode.GT
	case opcode.LE:
		return opcode.GE
	case opcode.GT:
		return opcode.LT
	case opcode.GE:
		return opcode.LE
	}
	return op
}

// lowerBound is the index of the first row whose key is at least v;
// upperBound the first whose key is above v.
func (s *Snapshot) lowerBound(v num) int { return s.firstWhere(v, 0) }

func (s *Snapshot) upperBound(v num) int { return s.firstWhere(v, 1) }

// firstWhere is the index of the first row whose key compares to v as t or
// more (cmp's -1, 0, 1). The search is written out rather than given to
// sort.Search: a point select spent more on the closure calls than on the
// comparisons.
func (s *Snapshot) firstWhere(v num, t int) int {
	lo, hi := 0, len(s.pkNums)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.pkNums[m].Cmp(v) < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// equalRange is the rows whose key is v: at most one, the key being the
// primary key, so one search finds it.
func (s *Snapshot) equalRange(v num) (lo, hi int) {
	lo = s.lowerBound(v)
	if lo < len(s.pkNums) && s.pkNums[lo].Cmp(v) == 0 {
		return lo, lo + 1
	}
	return lo, lo
}

// parseNum parses a decimal integer as MariaDB prints integer columns.
func parseNum(b []byte) (num, bool) {
	var n num
	if len(b) > 0 && b[0] == '-' {
		n.neg = true
		b = b[1:]
	}
	if len(b) == 0 {
		return num{}, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return num{}, false
		}
		d := uint64(c - '0')
		if n.mag > (math.MaxUint64-d)/10 {
			return num{}, false
		}
		n.mag = n.mag*10 + d
	}
	if n.mag == 0 {
		n.neg = false
	}
	return n, true
}

// DecodeParams reads the integer, string (or NULL) parameters of a COM_STMT_EXECUTE:
// flags (1), iteration count (4), NULL bitmap, new-params-bound flag, the
// types when bound, then the values, into into[:0]. Any other parameter
// type makes the execution unservable (false).
func DecodeParams(b []byte, n int, types []byte, into []Arg) ([]Arg, bool) {
	if n == 0 {
		return nil, true
	}
	pos := 5
	nb := (n + 7) / 8
	if len(b) < pos+nb+1 {
		return nil, false
	}
	bitmap := b[pos : pos+nb]
	pos += nb
	if b[pos] == 1 {
		pos += 1 + 2*n // (the types, which the caller passes as types)
	} else {
		pos++
	}
	if len(types) != 2*n || pos > len(b) {
		return nil, false
	}
	args := append(into[:0], make([]Arg, n)...)
	for i := 0; i < n; i++ {
		if bitmap[i/8]&(1<<(i%8)) != 0 {
			args[i].Null = true
			continue
		}
		t, unsigned := types[2*i], types[2*i+1]&0x80 != 0
		var size int
		switch t {
		case mysql.MYSQL_TYPE_TINY:
			size = 1
		case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
			size = 2
		case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
			size = 4
		case mysql.MYSQL_TYPE_LONGLONG:
			size = 8
		case mysql.MYSQL_TYPE_NULL:
			args[i].Null = true
			continue
		case mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_VARCHAR:
			// Text in the client's character set. (BLOB-typed parameters
			// are binary strings, which compare otherwise: not decoded.)
			v, w, ok := mysqlwire.ReadLenEncString(b[pos:])
			if !ok {
				return nil, false
			}
			args[i] = Arg{Str: true, S: v, bound: true}
			pos += w
			continue
		default:
			return nil, false
		}
		if len(b) < pos+size {
			return nil, false
		}
		var u uint64
		for j := size - 1; j >= 0; j-- {
			u = u<<8 | uint64(b[pos+j])
		}
		pos += size
		args[i].bound = true
		if unsigned {
			args[i].V = unsignedNum(u)
		} else {
			shift := uint(64 - 8*size)
			args[i].V = SignedNum(int64(u<<shift) >> shift)
		}
	}
	return args, true
}

// AppendBinaryValue appends column f's text value v in the binary
// protocol's encoding, or reports false for a type it does not encode
// exactly from text (FLOAT, DOUBLE: see encodable). A TIMESTAMP must have
// been shifted to the session's zone (ShiftTimestamp) first.
func AppendBinaryValue(b []byte, f *mysql.Field, v []byte) ([]byte, bool) {
	switch f.Type {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_INT24,
		mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		n, ok := parseNum(v)
		if !ok || !fitsInt(n, f) {
			return b, false // not an integer of the column's type: never wrapped
		}
		u := n.mag
		if n.neg {
			u = -u
		}
		switch f.Type {
		case mysql.MYSQL_TYPE_TINY:
			return append(b, byte(u)), true
		case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
			return binary.LittleEndian.AppendUint16(b, uint16(u)), true
		case mysql.MYSQL_TYPE_LONGLONG:
			return binary.LittleEndian.AppendUint64(b, u), true
		}
		return binary.LittleEndian.AppendUint32(b, uint32(u)), true
	case mysql.MYSQL_TYPE_DATE:
		if len(v) != len("YYYY-MM-DD") {
			return b, false
		}
		return appendBinaryDateTime(b, v)
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP:
		return appendBinaryDateTime(b, v)
	case mysql.MYSQL_TYPE_TIME:
		return appendBinaryTime(b, v)
	case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		return b, false
	}
	// Strings, BLOBs, JSON, DECIMAL, ENUM, SET, BIT, GEOMETRY: the same
	// bytes as in the text protocol.
	return mysqlwire.AppendLenEncBytes(b, v), true
}

// fitsInt reports whether n is within the range of f's integer type.
func fitsInt(n num, f *mysql.Field) bool {
	bits := uint(32)
	switch f.Type {
	case mysql.MYSQL_TYPE_TINY:
		bits = 8
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		bits = 16
	case mysql.MYSQL_TYPE_INT24:
		bits = 24
	case mysql.MYSQL_TYPE_LONGLONG:
		bits = 64
	}
	if f.Flag&mysql.UNSIGNED_FLAG != 0 {
		return !n.neg && n.mag <= math.MaxUint64>>(64-bits)
	}
	if n.neg {
		return n.mag <= 1<<(bits-1)
	}
	return n.mag < 1<<(bits-1)
}

// digits reads n decimal digits at v[i:].
func digits(v []byte, i, n int) (int, bool) {
	if i+n > len(v) {
		return 0, false
	}
	x := 0
	for _, c := range v[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + int(c-'0')
	}
	return x, true
}

// fraction reads ".ffffff" (1-6 digits) at v[i:] as microseconds.
func fraction(v []byte, i int) (int, bool) {
	switch {
	case i == len(v):
		return 0, true
	case i > len(v):
		return 0, false // the value ended before its seconds
	}
	if v[i] != '.' || len(v)-i-1 < 1 || len(v)-i-1 > 6 {
		return 0, false
	}
	n := len(v) - i - 1
	f, ok := digits(v, i+1, n)
	for ; n < 6; n++ {
		f *= 10
	}
	return f, ok
}

// appendBinaryDateTime encodes "YYYY-MM-DD[ HH:MM:SS[.ffffff]]" as the
// server does: the shortest of 0, 4, 7 or 11 bytes that holds the value.
func appendBinaryDateTime(b []byte, v []byte) ([]byte, bool) {
	y, ok1 := digits(v, 0, 4)
	mo, ok2 := digits(v, 5, 2)
	d, ok3 := digits(v, 8, 2)
	if !ok1 || !ok2 || !ok3 || len(v) < 10 || v[4] != '-' || v[7] != '-' || mo > 12 || d > 31 {
		return b, false
	}
	var h, mi, s, us int
	if len(v) > 10 {
		var ok4, ok5, ok6, ok7 bool
		h, ok4 = digits(v, 11, 2)
		mi, ok5 = digits(v, 14, 2)
		s, ok6 = digits(v, 17, 2)
		us, ok7 = fraction(v, 19)
		if !ok4 || !ok5 || !ok6 || !ok7 || v[10] != ' ' || v[13] != ':' || v[16] != ':' || h > 23 || mi > 59 || s > 59 {
			return b, false
		}
	}
	switch {
	case us != 0:
		b = append(b, 11, byte(y), byte(y>>8), byte(mo), byte(d), byte(h), byte(mi), byte(s))
		return binary.LittleEndian.AppendUint32(b, uint32(us)), true
	case h != 0 || mi != 0 || s != 0:
		return append(b, 7, byte(y), byte(y>>8), byte(mo), byte(d), byte(h), byte(mi), byte(s)), true
	case y != 0 || mo != 0 || d != 0:
		return append(b, 4, byte(y), byte(y>>8), byte(mo), byte(d)), true
	}
	return append(b, 0), true
}

// appendBinaryTime encodes "[-]H+:MM:SS[.ffffff]" as the server does.
func appendBinaryTime(b []byte, v []byte) ([]byte, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	colon := -1
	for i, c := range v {
		if c == ':' {
			colon = i
			break
		}
	}
	if colon < 1 {
		return b, false
	}
	h, ok1 := digits(v, 0, colon)
	mi, ok2 := digits(v, colon+1, 2)
	s, ok3 := digits(v, colon+4, 2)
	us, ok4 := fraction(v, colon+6)
	if !ok1 || !ok2 || !ok3 || !ok4 || len(v) < colon+6 || v[colon+3] != ':' || h > 838 || mi > 59 || s > 59 {
		return b, false // (TIME spans -838:59:59 to 838:59:59)
	}
	sign := byte(0)
	if neg {
		sign = 1
	}
	days, h := h/24, h%24
	switch {
	case us != 0:
		b = append(b, 12, sign)
		b = binary.LittleEndian.AppendUint32(b, uint32(days))
		b = append(b, byte(h), byte(mi), byte(s))
		return binary.LittleEndian.AppendUint32(b, uint32(us)), true
	case days != 0 || h != 0 || mi != 0 || s != 0:
		b = append(b, 8, sign)
		b = binary.LittleEndian.AppendUint32(b, uint32(days))
		return append(b, byte(h), byte(mi), byte(s)), true
	}
	return append(b, 0), true
}

// aggregate computes the plan's aggregates over rows: one value each, nil
// for NULL, as the text protocol prints them (COUNT and SUM of integers as
// integers; MIN and MAX as the column prints the winning value).
func (p *Plan) aggregate(snap *Snapshot, rows []int, env RunEnv) ([][]byte, bool) {
	r := &RowCtx{snap: snap, offs: make([]int, 0, len(snap.Fields)+1)}
	out := make([][]byte, len(p.Aggs))
	for j, g := range p.Aggs {
		var count int64
		sum := new(big.Int)
		var best num
		var bestRaw []byte
		for _, i := range rows {
			if g.Col < 0 {
				count++
				continue
			}
			if !r.SetRow(snap.Rows[i]) {
				return nil, false
			}
			v, null, _ := r.Field(g.Col)
			if null {
				continue
			}
			n, ok := parseNum(v)
			if !ok {
				return nil, false
			}
			count++
			switch g.Fn {
			case "sum", "avg":
				x := new(big.Int).SetUint64(n.mag)
				if n.neg {
					x.Neg(x)
				}
				sum.Add(sum, x)
			case "min", "max":
				c := n.Cmp(best)
				if bestRaw == nil || (g.Fn == "min" && c < 0) || (g.Fn == "max" && c > 0) {
					best, bestRaw = n, append([]byte(nil), v...)
				}
			}
		}
		switch g.Fn {
		case "count":
			out[j] = []byte(big.NewInt(count).String())
		case "sum":
			if count > 0 {
				out[j] = []byte(sum.String())
			}
		case "avg":
			if count > 0 {
				if env.DivPrecision%9 == 0 {
					// At a scale that fills whole 9-digit words (0 among
					// them) the backend truncates the quotient instead of
					// rounding it.
					return nil, false
				}
				out[j] = average(sum, count, env.DivPrecision)
			}
		default:
			out[j] = bestRaw
		}
	}
	return out, true
}

// average prints sum/count as a DECIMAL with scale digits after the
// point, rounded half away from zero, as the backend prints AVG of an
// integer column (scale is @@div_precision_increment).
func average(sum *big.Int, count int64, scale int) []byte {
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	num := new(big.Int).Mul(new(big.Int).Abs(sum), pow)
	num.Mul(num, big.NewInt(2))
	num.Add(num, big.NewInt(count))
	q := num.Div(num, big.NewInt(2*count)) // floor((2|s|*10^k + c) / 2c): half up
	digits := q.String()
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	var b []byte
	if sum.Sign() < 0 && q.Sign() != 0 {
		b = append(b, '-')
	}
	b = append(b, digits[:len(digits)-scale]...)
	if scale > 0 {
		b = append(b, '.')
		b = append(b, digits[len(digits)-scale:]...)
	}
	return b
}

// aggregateRowShown applies LIMIT and OFFSET to an aggregate's single row.
func (p *Plan) aggregateRowShown(args []Arg) (bool, bool) {
	if p.limit.kind == opNone {
		return true, true
	}
	r := &RowCtx{args: args}
	n, ok := r.operand(p.limit)
	if !ok || n.neg {
		return false, false
	}
	if p.offset.kind != opNone {
		off, ok := r.operand(p.offset)
		if !ok || off.neg {
			return false, false
		}
		if off.mag > 0 {
			return false, true
		}
	}
	return n.mag > 0, true
}
