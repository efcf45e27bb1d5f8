package eval

import (
	"bytes"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Evaluating conditions on string columns. A value that cannot be
// compared exactly (a character whose weight is unknown, text in a
// character set the session would convert) sets RowCtx.fail, and the
// statement goes to the backend.

// strOperand returns a string literal's or a string parameter's bytes.
func (r *RowCtx) strOperand(o operand) (v []byte, null bool) {
	switch o.kind {
	case opString:
		return o.str, false
	case opParam:
		if o.param >= len(r.args) || r.args[o.param].Null {
			return nil, true
		}
		return r.args[o.param].S, false
	}
	return nil, true
}

// compareStr compares column col's value v with the string w under the
// column's collation.
func (r *RowCtx) compareStr(col int, v, w []byte) (int, bool) {
	c := r.snap.Colls[col]
	if !r.env.usable(c, w) {
		return 0, false
	}
	var ok1, ok2 bool
	r.k1, ok1 = c.key(r.k1[:0], v)
	r.k2, ok2 = c.key(r.k2[:0], w)
	if !ok1 || !ok2 {
		return 0, false
	}
	return c.compareKeys(r.k1, r.k2), true
}

// usable reports whether the string w, from the statement, means the same
// characters when compared with a column of collation c: ASCII always (in
// every character set the session may use, checked before running), other
// text only when it is UTF-8 from a utf8mb4 session and the column is
// utf8mb4 or binary (conversions between character sets are left to the
// backend).
func (env RunEnv) usable(c *Collation, w []byte) bool {
	for _, b := range w {
		if b >= utf8.RuneSelf {
			if !env.UTF8Args {
				return false
			}
			if c.Binary {
				return true
			}
			return c.Charset == "utf8mb4" && utf8.Valid(w)
		}
	}
	return true
}

func cmpResult(op opcode.Op, c int) tri {
	var t bool
	switch op {
	case opcode.EQ:
		t = c == 0
	case opcode.NE:
		t = c != 0
	case opcode.LT:
		t = c < 0
	case opcode.LE:
		t = c <= 0
	case opcode.GT:
		t = c > 0
	case opcode.GE:
		t = c >= 0
	}
	if t {
		return triTrue
	}
	return triFalse
}

func (e strCmpExpr) eval(r *RowCtx) tri {
	v, null, _ := r.Field(e.col)
	w, wnull := r.strOperand(e.val)
	if null || wnull {
		return triNull
	}
	c, ok := r.compareStr(e.col, v, w)
	if !ok {
		r.fail = true
		return triNull
	}
	return cmpResult(e.op, c)
}

func (e strColsExpr) eval(r *RowCtx) tri {
	v, null, _ := r.Field(e.l)
	w, wnull, _ := r.Field(e.r)
	if null || wnull {
		return triNull
	}
	c := r.snap.Colls[e.l]
	var ok1, ok2 bool
	r.k1, ok1 = c.key(r.k1[:0], v)
	r.k2, ok2 = c.key(r.k2[:0], w)
	if !ok1 || !ok2 {
		r.fail = true
		return triNull
	}
	return cmpResult(e.op, c.compareKeys(r.k1, r.k2))
}

func (e strInExpr) eval(r *RowCtx) tri {
	v, null, _ := r.Field(e.col)
	if null {
		return triNull
	}
	res := triFalse
	for _, o := range e.list {
		w, wnull := r.strOperand(o)
		if wnull {
			res = triNull
			continue
		}
		c, ok := r.compareStr(e.col, v, w)
		if !ok {
			r.fail = true
			return triNull
		}
		if c == 0 {
			res = triTrue
			break
		}
	}
	if e.not {
		return triNot(res)
	}
	return res
}

func (e strBetweenExpr) eval(r *RowCtx) tri {
	ge := strCmpExpr{op: opcode.GE, col: e.col, val: e.lo}.eval(r)
	le := strCmpExpr{op: opcode.LE, col: e.col, val: e.hi}.eval(r)
	res := andExpr{constTri(ge), constTri(le)}.eval(r)
	if e.not {
		return triNot(res)
	}
	return res
}

func (e likeExpr) eval(r *RowCtx) tri {
	v, null, _ := r.Field(e.col)
	pat, pnull := r.strOperand(e.pat)
	if null || pnull {
		return triNull
	}
	c := r.snap.Colls[e.col]
	if bytes.IndexByte(pat, '\\') >= 0 || !r.env.usable(c, pat) {
		r.fail = true // escapes: their meaning depends on sql_mode
		return triNull
	}
	m, ok := c.like(v, pat)
	if !ok {
		r.fail = true
		return triNull
	}
	if m != e.not {
		return triTrue
	}
	return triFalse
}
